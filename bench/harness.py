"""What both benchmarks stand on: local ports, the processes they start, and how they end.

The benchmarks run as scripts (``python bench/api.py``), so this module is imported by its
plain name from the folder it shares with them.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

HOST = "127.0.0.1"
START_TIMEOUT = 30.0  # seconds a process we start has to be ready
STOP_TIMEOUT = 5.0


class BenchError(Exception):
    """The benchmark cannot go on; the message says why."""


def free_ports(count: int) -> list[int]:
    """Ports nobody listens on, all different (the probes are held open together)."""
    with ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((HOST, 0))
        return [int(probe.getsockname()[1]) for probe in probes]


@dataclass(frozen=True)
class Process:
    """A process we started, and the file its output goes to."""

    popen: subprocess.Popen[bytes]
    log: Path
    stop_timeout: float = STOP_TIMEOUT

    def stop(self) -> None:
        """Terminate, and kill if it is still there after ``stop_timeout`` seconds."""
        if self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def check(self) -> None:
        """Raise if the process is gone."""
        if self.popen.poll() is not None:
            raise BenchError(f"{self.log.name}: the process exited:\n{self.tail()}")

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def start(
    stack: ExitStack,
    command: list[str],
    env: dict[str, str],
    log: Path,
    stop_timeout: float = STOP_TIMEOUT,
) -> Process:
    """Start a process whose output goes to ``log``; the stack stops it, whatever happens."""
    output = stack.enter_context(log.open("wb"))
    popen = subprocess.Popen(
        command, env=env, cwd=log.parent, stdout=output, stderr=subprocess.STDOUT
    )
    process = Process(popen, log, stop_timeout)
    stack.callback(process.stop)
    return process


def call(port: int, method: str, path: str) -> bytes:
    """A plain HTTP request to a control port of a process we started (on HOST); its body."""
    request = urllib.request.Request(f"http://{HOST}:{port}{path}", method=method)
    with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (local)
        return bytes(response.read())


def wait_answering(process: Process, probe: Callable[[], object], what: str) -> None:
    """Call ``probe`` until it no longer raises OSError (the process answers on its port)."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        process.check()
        try:
            probe()
        except OSError:
            time.sleep(0.1)
        else:
            return
    raise BenchError(f"{what} did not start within {START_TIMEOUT:.0f} s")


def exit_status(prog: str, bench: Callable[[], bool]) -> int:
    """The exit status of a benchmark: 0 when all went well, 1 when not (or on an error,
    said in one line), 130 when interrupted."""
    try:
        return 0 if bench() else 1
    except BenchError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
