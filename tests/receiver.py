"""A real HTTPS webhook receiver for tests: its own thread and event loop, and TLS from a
local CA of the test's own (``clubwire.receiving``, as ``clubwire listen`` uses).

Each test picks what it answers (``status`` and ``answer_headers``, ``delay``, or ``hang``;
``echo`` sends the request's body back) and reads back what arrived. Modelled on Svix's
test receiver. A test that needs a receiver of its own (``listening``) gives the handler.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from clubwire import receiving
from clubwire.receiving import Authority

__all__ = ["Authority", "Received", "Receiver", "authority", "listening", "serving"]


@dataclass(frozen=True)
class Received:
    headers: dict[str, str]
    body: bytes
    at: float
    raw_headers: tuple[tuple[bytes, bytes], ...] = ()  # each as it came, name and value bytes
    in_flight: int = 1  # requests the receiver was answering as this one arrived, itself included


@dataclass
class Receiver:
    """What the receiver answers can be changed while it runs."""

    url: str
    status: int = 200
    answer_headers: list[tuple[str, str]] = field(default_factory=list)  # a name may repeat
    delay: float = 0.0
    hang: bool = False
    echo: bool = False
    received: list[Received] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)
    in_flight: int = 0

    def wait_for(self, count: int, timeout: float = 20.0) -> list[Received]:
        """Block until ``count`` requests have arrived; fails the test after ``timeout``."""
        with self.arrived:
            done = self.arrived.wait_for(lambda: len(self.received) >= count, timeout)
        assert done, f"expected {count} requests, got {len(self.received)} in {timeout} s"
        return list(self.received)

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        with self.arrived:
            self.in_flight += 1
            received = Received(
                dict(request.headers),
                body,
                time.monotonic(),
                tuple(request.raw_headers),
                self.in_flight,
            )
            self.received.append(received)
            self.arrived.notify_all()
        try:
            if self.hang:
                await asyncio.sleep(3600)
            if self.delay:
                await asyncio.sleep(self.delay)
            return web.Response(
                status=self.status,
                body=body if self.echo else f"answered {self.status}".encode(),
                headers=self.answer_headers,
            )
        finally:
            with self.arrived:
                self.in_flight -= 1


def authority(folder: Path) -> Authority:
    """A CA of the test's own (``bundle`` is what ``CLUBWIRE_CA_BUNDLE`` names)."""
    return receiving.authority(folder / receiving.TLS_FOLDER)


async def shut(runner: web.AppRunner) -> None:
    """Stop listening, and end handlers still hanging (a receiver that never answers)."""
    await runner.cleanup()
    others = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in others:
        task.cancel()
    await asyncio.gather(*others, return_exceptions=True)


@contextmanager
def in_a_thread(app: web.Application, tls: Authority | None = None) -> Iterator[int]:
    """``app`` served on 127.0.0.1 (over TLS with ``tls``) by a thread and event loop of its
    own until the block ends; yields its port."""
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    runners: list[web.AppRunner] = []
    ports: list[int] = []

    async def start() -> None:
        runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        ssl_context = None if tls is None else tls.server_context()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context)
        await site.start()
        runners.append(runner)
        ports.append(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10), "the server did not start"
    try:
        yield ports[0]
    finally:
        asyncio.run_coroutine_threadsafe(shut(runners[0]), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@contextmanager
def serving(tls: Authority, path: str = "/hooks", **answers: object) -> Iterator[Receiver]:
    """A receiver listening on 127.0.0.1 until the block ends."""
    app = web.Application()
    receiver = Receiver(url="", **answers)  # type: ignore[arg-type]
    app.router.add_post(path, receiver.handle)
    with in_a_thread(app, tls) as port:
        receiver.url = f"https://127.0.0.1:{port}{path}"
        yield receiver


@contextmanager
def listening(
    tls: Authority, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> Iterator[str]:
    """Serve ``handler`` at ``/hooks`` over TLS in a thread of its own; yields the URL."""
    app = web.Application()
    app.router.add_post("/hooks", handler)
    with in_a_thread(app, tls) as port:
        yield f"https://127.0.0.1:{port}/hooks"
