"""Running the HTTP service under uvicorn (httptools + uvloop)."""

from __future__ import annotations

import contextlib
import gc
import signal
from collections.abc import Sequence
from types import FrameType

import uvicorn

from clubwire import interrupts, logs, tracing
from clubwire.settings import Settings
from clubwire.web.app import Service, create_app


def run(
    settings: Settings,
    host: str,
    port: int,
    services: Sequence[Service] = (),
    role: str = "serve",
) -> None:
    """Serve until interrupted; on SQLite a webhook worker runs in this process too, and
    ``services`` (``create_app``) run beside it. Traced as ``role`` when the environment
    asks for traces (``clubwire.tracing``).

    Access logs are off: clubwire writes its own, JSON lines without secrets.
    """
    logs.configure(settings.log_level)
    with tracing.traced(role):
        _serve(settings, host, port, services)


def _serve(settings: Settings, host: str, port: int, services: Sequence[Service]) -> None:
    config = uvicorn.Config(
        create_app(settings, run_worker=settings.is_sqlite, services=services),
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        # The client is the socket's peer, or what X-Forwarded-For says behind a trusted proxy
        # only (uvicorn would trust 127.0.0.1 by default: anything on the host could pose as
        # any address to the rate limits and the sign-in throttle).
        proxy_headers=bool(settings.trusted_proxies),
        forwarded_allow_ips=list(settings.trusted_proxies),
        log_config=None,
        log_level="info",
        server_header=False,
    )
    # Everything long-lived exists by now: keep it out of the collector's way, so that full
    # collections under load stay short (they took 50-60 ms before; bench/api.py).
    gc.collect()
    gc.freeze()
    # uvicorn raises the Ctrl-C or SIGTERM it handled again once it has shut down: a clean
    # stop, the last spans sent (SIGTERM's default would end the process before ``traced``).
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    with contextlib.suppress(KeyboardInterrupt):
        _Server(config).run()


class _Server(uvicorn.Server):
    """uvicorn's server, but a second Ctrl-C during the graceful stop ends the process at
    once (``interrupts``); uvicorn's own forced exit cancels the app mid-shutdown and logs
    the traceback of that."""

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit and sig == signal.SIGINT:
            interrupts.stop_at_once()
        super().handle_exit(sig, frame)
