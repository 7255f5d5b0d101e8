"""The real ``clubwire serve`` in a child process, as an operator starts it, for browser tests.

The server gets its configuration only from ``CLUBWIRE_*`` variables built from the test's
``Settings`` (this process's own ``CLUBWIRE_*`` are dropped), runs in the test's folder (so no
``.env`` is read) and writes its output to a file there, which no pipe can fill up.
"""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from clubwire.settings import Settings
from tests.ports import free_port

START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
POLL = 0.05


@dataclass(frozen=True)
class LiveServer:
    """A running server: its base URL and the file its output goes to."""

    url: str
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


class StartServer(Protocol):
    """The ``start_server`` fixture: start a server, with more ``CLUBWIRE_*`` if given."""

    def __call__(self, *, ca_bundle: Path | None = None, **env: str) -> str: ...


def environment(
    settings: Settings, url: str, ca_bundle: Path | None, extra: Mapping[str, str]
) -> dict[str, str]:
    """This process's environment without its ``CLUBWIRE_*``, then the test's settings."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CLUBWIRE_")}
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "CLUBWIRE_HOME": str(settings.home),
            "CLUBWIRE_DATABASE_URL": settings.database_url,
            "CLUBWIRE_SECRET_KEY": settings.secret_key_value(),
            "CLUBWIRE_PUBLIC_URL": url,
            "CLUBWIRE_ALLOW_PRIVATE_TARGETS": "true",
        }
    )
    if settings.platform_token is not None:
        env["CLUBWIRE_PLATFORM_TOKEN"] = settings.platform_token.get_secret_value()
    if ca_bundle is not None:
        env["CLUBWIRE_CA_BUNDLE"] = str(ca_bundle)
    env.update(extra)
    return env


@contextmanager
def serve(
    settings: Settings,
    folder: Path,
    ca_bundle: Path | None = None,
    extra: Mapping[str, str] | None = None,
) -> Iterator[LiveServer]:
    """``clubwire serve`` on a free port until the block ends; it is stopped whatever happens."""
    port = free_port()
    server = LiveServer(f"http://127.0.0.1:{port}", folder / f"server-{port}.log")
    env = environment(settings, server.url, ca_bundle, extra or {})
    with server.log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "clubwire", "serve", "--port", str(port)],
            cwd=folder,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_until_answering(process, server, port)
        yield server
    finally:
        _stop(process)


def _wait_until_answering(process: subprocess.Popen[bytes], server: LiveServer, port: int) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"clubwire serve exited with {process.returncode}:\n{server.output()}")
        if _answers(port):
            return
        time.sleep(POLL)
    pytest.fail(f"clubwire serve did not answer within {START_TIMEOUT} s:\n{server.output()}")


def _answers(port: int) -> bool:
    """Whether anything answers HTTP on the port (any status will do)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
    try:
        connection.request("GET", "/openapi.json")
        connection.getresponse().read()
    except OSError:
        return False
    finally:
        connection.close()
    return True


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn's graceful shutdown), then SIGKILL if it does not end in time."""
    if process.poll() is None:
        process.terminate()
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=STOP_TIMEOUT)
