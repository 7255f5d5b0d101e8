"""Workers for the functional tests: one run in this process until the database says it is
done, and real ``clubwire worker`` processes, started as the operator would and watched.

* In this process (with the ``hooks`` settings of ``worker/conftest.py``): ``add_endpoint``
  and ``publish_registrations`` to give the worker something to do, ``deliver_until`` to run
  it, ``delivery_statuses`` to see where it got; ``attempt_once``, the worker's steps for one
  delivery at a time that stands still: claim, attempt, record.
* Worker processes (``python -m clubwire worker`` with ``CLUBWIRE_*`` variables):
  ``worker_environment``, ``PATIENT`` for runs of thousands of deliveries, ``Workers`` (each
  one's output in a file, every one stopped when the block ends) and ``count_settled``.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Self

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Result
from clubwire.services import endpoints
from clubwire.services.delivery import attempts, claims, events, records
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery
from clubwire.storage.queue import Want
from clubwire.worker import running
from tests.conftest import SECRET_KEY
from tests.factories import EPOCH, FakeClock, make_club, registration

READY = "clubwire worker: delivering webhooks"
POLL = 0.02


# --- a worker in this process -------------------------------------------------------------------


def add_endpoint(
    sessions: sessionmaker[Session], hooks: Settings, url: str, slug: str = "granite"
) -> tuple[str, str]:
    with sessions.begin() as session:
        club = session.scalar(select(Club).where(Club.slug == slug)) or make_club(session, slug)
        endpoint, secret = endpoints.create_endpoint(
            session, club, url, ["registration.created"], EPOCH, hooks
        )
        return endpoint.id, secret


def publish_registrations(
    sessions: sessionmaker[Session], count: int = 1, slug: str = "granite", at: datetime = EPOCH
) -> list[str]:
    """``count`` events, their deliveries due ``at`` (long past, by default: due now)."""
    ids = []
    with sessions.begin() as session:
        club = session.scalar(select(Club).where(Club.slug == slug))
        assert club is not None
        for _ in range(count):
            event, _ = events.publish(session, club, "registration.created", registration(), at)
            ids.append(event.id)
    return ids


def deliver_until(
    hooks: Settings, sessions: sessionmaker[Session], done: Callable[[], bool], timeout: float = 20
) -> None:
    """Run a worker until ``done()`` holds (checked between short waits)."""

    async def run() -> None:
        async with running.running(hooks, sessions):
            for _ in range(int(timeout / 0.02)):
                if await asyncio.to_thread(done):
                    return
                await asyncio.sleep(0.02)
            raise AssertionError("the worker did not get there in time")

    asyncio.run(run())


def attempt_once(sessions: sessionmaker[Session], hooks: Settings, now: datetime) -> Result:
    """The one delivery due at ``now`` claimed, attempted and recorded as the worker does, by
    a clock that stands at ``now``; its result."""
    lease = now + timedelta(seconds=hooks.lease_seconds)
    with sessions.begin() as session:
        (lane,) = claims.take_lanes(session, now, lease, "wkr_once", 1)
        (job,), _ = claims.claim(session, now, "wkr_once", {lane.endpoint_id: Want(lane, 1, lease)})

    async def attempt() -> Result:
        async with attempts.attempter(hooks, FakeClock(now)) as sends:
            return await sends.attempt(job)

    result = asyncio.run(attempt())
    with sessions.begin() as session:
        records.record(session, [result], now)
    return result


def delivery_statuses(sessions: sessionmaker[Session]) -> list[tuple[str, int]]:
    with sessions() as session:
        return [
            (d.status, d.attempt)
            for d in session.scalars(select(Delivery).order_by(Delivery.created_at))
        ]


# --- worker processes -------------------------------------------------------------------------


# For runs of thousands of deliveries: a lease and deadlines a busy machine stays inside.
PATIENT = {
    "CLUBWIRE_LEASE_SECONDS": "60",
    "CLUBWIRE_ATTEMPT_TIMEOUT": "20",
    "CLUBWIRE_CONNECT_TIMEOUT": "10",
}


def worker_environment(database_url: str, ca_bundle: Path, **overrides: str) -> dict[str, str]:
    """This process's environment without its ``CLUBWIRE_*``, set up for local receivers."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CLUBWIRE_")}
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "CLUBWIRE_DATABASE_URL": database_url,
            "CLUBWIRE_SECRET_KEY": SECRET_KEY,
            "CLUBWIRE_ALLOW_PRIVATE_TARGETS": "true",
            "CLUBWIRE_CA_BUNDLE": str(ca_bundle),
            "CLUBWIRE_RETRY_SCHEDULE": "0,0,0,0,0",
            "CLUBWIRE_LEASE_SECONDS": "3",
            "CLUBWIRE_ATTEMPT_TIMEOUT": "2",
            "CLUBWIRE_CONNECT_TIMEOUT": "1",
        }
    )
    env.update(overrides)
    return env


class Workers:
    """The worker processes of one test; leaving the block kills and reaps any still running.

    Each worker writes its output to a file in ``folder`` (no pipe can fill up and block it).
    A worker that exits without the test stopping it fails the next :meth:`until`.
    """

    def __init__(self, folder: Path, env: dict[str, str]) -> None:
        self._folder = folder
        self._env = env
        self._started: list[tuple[subprocess.Popen[bytes], Path]] = []
        self._stopping: set[int] = set()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for process, _ in self._started:
            if process.poll() is None:
                process.kill()
        for process, _ in self._started:
            process.wait(timeout=30)

    def start(self, *command: str, **overrides: str) -> subprocess.Popen[bytes]:
        """``clubwire worker``, or the ``command`` given (``serve`` delivers on SQLite too)."""
        log = self._folder / f"worker-{len(self._started) + 1}.log"
        with log.open("wb") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "clubwire", *(command or ["worker"])],
                cwd=self._folder,
                env={**self._env, **overrides},
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self._started.append((process, log))
        return process

    def output(self, process: subprocess.Popen[bytes]) -> str:
        log = next(log for started, log in self._started if started is process)
        return log.read_text(errors="replace")

    def outputs(self) -> str:
        return "\n".join(
            f"--- worker pid {process.pid} (exit {process.poll()}):\n{log.read_text()}"
            for process, log in self._started
        )

    def kill(self, process: subprocess.Popen[bytes]) -> None:
        """SIGKILL: no chance to finish or record anything (safe from any thread)."""
        self._stopping.add(process.pid)
        os.kill(process.pid, signal.SIGKILL)

    def terminate(self, process: subprocess.Popen[bytes]) -> None:
        self._stopping.add(process.pid)
        process.send_signal(signal.SIGTERM)

    def interrupt(self, process: subprocess.Popen[bytes]) -> None:
        """Ctrl-C."""
        self._stopping.add(process.pid)
        process.send_signal(signal.SIGINT)

    def ready(self, process: subprocess.Popen[bytes], timeout: float = 30) -> None:
        self.until(lambda: READY in self.output(process), f"worker {process.pid} ready", timeout)

    def until(self, condition: Callable[[], object], what: str, timeout: float = 30) -> None:
        """Poll ``condition`` until it holds; fail with the workers' output after ``timeout``."""
        deadline = time.monotonic() + timeout
        while not condition():
            for process, _ in self._started:
                if process.pid not in self._stopping and process.poll() is not None:
                    pytest.fail(f"a worker exited while waiting for {what}\n{self.outputs()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} within {timeout} s\n{self.outputs()}")
            time.sleep(POLL)


def count_settled(sessions: sessionmaker[Session]) -> int:
    """Deliveries succeeded (and so recorded: nothing of them is leased any more)."""
    with sessions() as session:
        query = select(func.count()).where(Delivery.status == "succeeded")
        return session.scalar(query) or 0
