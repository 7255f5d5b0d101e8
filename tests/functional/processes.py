"""Real ``clubwire`` processes for tests: started as a user would, watched, stopped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Literal

import pytest

from clubwire.settings import Settings
from tests.conftest import SECRET_KEY
from tests.ports import free_port

POLL = 0.05


def wait_for(url: str, headers: dict[str, str], deadline: float = 20.0) -> bytes:
    """GET ``url`` until the server answers 2xx (it may still be starting)."""
    start = time.monotonic()
    while True:
        try:
            with urllib.request.urlopen(
                urllib.request.Request(url, headers=headers), timeout=2
            ) as response:
                body: bytes = response.read()
                return body
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() - start > deadline:
                raise
            time.sleep(0.1)


def environment(home: Path, **settings: str) -> dict[str, str]:
    """This process's environment without its ``CLUBWIRE_*``, with a home folder of the test's."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CLUBWIRE_")}
    return {**env, "PYTHONUNBUFFERED": "1", "CLUBWIRE_HOME": str(home), **settings}


class Clubwire:
    """One ``python -m clubwire …`` process; its stdout and stderr go to files, not pipes."""

    def __init__(self, process: subprocess.Popen[bytes], out: Path, err: Path) -> None:
        self.process = process
        self._out = out
        self._err = err

    @property
    def out(self) -> str:
        return self._out.read_text(errors="replace")

    @property
    def err(self) -> str:
        return self._err.read_text(errors="replace")

    def until(
        self,
        condition: Callable[[str], object],
        what: str,
        timeout: float = 20,
        stream: Literal["out", "err"] = "out",
    ) -> str:
        """Poll stdout (or stderr) until ``condition`` holds for it; fail with the output
        otherwise."""
        deadline = time.monotonic() + timeout
        while not condition(out := self.err if stream == "err" else self.out):
            if self.process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"no {what} (exit {self.process.poll()})\n{out}\n{self.err}")
            time.sleep(POLL)
        return out

    def interrupt(self, timeout: float = 30) -> int:
        """Ctrl-C, then the exit code."""
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout)


@contextmanager
def clubwire(
    folder: Path, env: dict[str, str], *args: str, stdin: bytes = b""
) -> Iterator[Clubwire]:
    """Run ``clubwire ARGS`` in ``folder``; it is killed if still running when the block ends."""
    count = len(list(folder.glob("clubwire-*.out")))
    out, err = folder / f"clubwire-{count}.out", folder / f"clubwire-{count}.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "clubwire", *args],
            cwd=folder,
            env=env,
            stdin=subprocess.PIPE,
            stdout=stdout,
            stderr=stderr,
        )
    assert process.stdin is not None
    process.stdin.write(stdin)
    process.stdin.close()
    try:
        yield Clubwire(process, out, err)
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def fetch(url: str, key: str, **headers: str) -> int:
    """The status of GET ``url`` with the API key and ``headers``."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {key}", **headers})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def servers(
    stack: ExitStack, settings: Settings, folder: Path, count: int, **env: str
) -> list[str]:
    """``count`` real ``clubwire serve`` processes on the test's database, ready; the URL of
    granite's programs on each."""
    urls = []
    for number in range(count):
        port = free_port()
        env_of_one = environment(
            folder / str(number),
            CLUBWIRE_DATABASE_URL=settings.database_url,
            CLUBWIRE_SECRET_KEY=SECRET_KEY,
            **env,
        )
        (folder / str(number)).mkdir(parents=True)
        args = ("serve", "--port", str(port))
        stack.enter_context(clubwire(folder / str(number), env_of_one, *args))
        base = f"http://127.0.0.1:{port}"
        wait_for(f"{base}/readyz", {})
        urls.append(f"{base}/clubs/granite/api/v1/programs")
    return urls
