"""Crash safety with real ``clubwire worker`` processes: SIGKILL, SIGTERM, several side by side.

Each test starts workers as the operator would (``python -m clubwire worker`` with ``CLUBWIRE_*``
variables) against real TLS receivers, waits by polling the database or the receiver with a
deadline, and stops every process it started before it ends.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import interrupts
from clubwire.domain import timestamps
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage import database
from clubwire.storage.models import Delivery, Endpoint, QueueHead
from tests.conftest import make_settings
from tests.factories import make_club, registration
from tests.functional.workers import PATIENT, Workers, count_settled, worker_environment
from tests.ports import free_port
from tests.receiver import authority, listening, serving

pytestmark = pytest.mark.slow

# --- the database as the tests see it -----------------------------------------------------------


@dataclass(frozen=True)
class Row:
    id: str
    status: str
    attempt: int
    leased: bool  # unfinished, and its endpoint's lane is leased to a worker


def rows(sessions: sessionmaker[Session]) -> dict[str, Row]:
    with sessions() as session:
        found = session.execute(
            select(
                Delivery.id,
                Delivery.status,
                Delivery.attempt,
                Delivery.next_attempt_at.is_not(None) & QueueHead.lease_until.is_not(None),
            ).outerjoin(QueueHead, QueueHead.endpoint_id == Delivery.endpoint_id)
        ).all()
    return {d: Row(d, status, attempt, bool(lease)) for d, status, attempt, lease in found}


def leased(sessions: sessionmaker[Session]) -> set[str]:
    return {row.id for row in rows(sessions).values() if row.leased}


def publish(
    sessions: sessionmaker[Session], settings: Settings, urls: Sequence[str], count: int
) -> set[str]:
    """A club with one endpoint per URL, and ``count`` events to all of them, due now; returns
    the delivery ids. One transaction."""
    hooks = settings.model_copy(update={"allow_private_targets": True})
    now = timestamps.utc_now()
    with sessions.begin() as session:
        club = make_club(session)
        for url in urls:
            endpoints.create_endpoint(session, club, url, ["registration.created"], now, hooks)
        for _ in range(count):
            events.publish(session, club, "registration.created", registration(), now)
    delivery_ids = set(rows(sessions))
    assert len(delivery_ids) == count * len(urls)
    return delivery_ids


def assert_all_settled(sessions: sessionmaker[Session], delivery_ids: set[str]) -> None:
    final = rows(sessions)
    assert set(final) == delivery_ids
    unsettled = [row for row in final.values() if row.status != "succeeded" or row.leased]
    assert unsettled == []


# --- a receiver that kills the worker right after answering -------------------------------------


@dataclass
class AnswerThenKill:
    """Answers 200 to every request; right after the ``after``-th answer has been written to
    the socket it calls ``kill`` (once), before the worker can have recorded it."""

    after: int
    delay: float = 0.05
    kill: Callable[[], None] | None = None
    received: list[str] = field(default_factory=list)
    answered: list[str] = field(default_factory=list)
    answered_before_kill: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        await request.read()
        delivery_id = request.headers["X-Service-Delivery"]
        with self.lock:
            self.received.append(delivery_id)
        await asyncio.sleep(self.delay)
        response = web.Response(status=200, text="ok")
        await response.prepare(request)
        await response.write_eof()  # the whole answer is handed to the kernel here
        with self.lock:
            self.answered.append(delivery_id)
            kill = self.kill if len(self.answered) >= self.after else None
            if kill is not None:
                self.kill = None
                self.answered_before_kill = set(self.answered)
        if kill is not None:
            kill()
        return response

    def requests(self) -> Counter[str]:
        with self.lock:
            return Counter(self.received)


# --- the tests --------------------------------------------------------------------------------


def test_a_killed_worker_loses_no_delivery(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """SIGKILL with attempts in flight: once the leases run out a new worker makes them all."""
    tls = authority(tmp_path)
    env = worker_environment(settings.database_url, tls.bundle)
    with serving(tls, delay=1.5) as receiver, Workers(tmp_path, env) as workers:
        delivery_ids = publish(sessions, settings, [receiver.url], 30)
        first = workers.start()
        workers.until(
            lambda: receiver.received and leased(sessions), "attempts in flight", timeout=30
        )
        workers.kill(first)
        assert first.wait(timeout=10) == -signal.SIGKILL
        in_flight = leased(sessions)
        assert in_flight, "the worker was killed with no attempt in flight"
        receiver.delay = 0
        workers.start()
        workers.until(
            lambda: count_settled(sessions) == len(delivery_ids), "every delivery made", 60
        )
    requests = Counter(r.headers["X-Service-Delivery"] for r in receiver.received)
    assert set(requests) == delivery_ids  # duplicates are allowed, loss is not
    assert_all_settled(sessions, delivery_ids)
    assert "Traceback" not in workers.outputs(), workers.outputs()


def test_an_answer_the_worker_died_before_recording_is_delivered_again(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """The receiver answers 200, then kills the worker at once: at least once, never lost."""
    tls = authority(tmp_path)
    env = worker_environment(settings.database_url, tls.bundle)
    killer = AnswerThenKill(after=5)
    with listening(tls, killer.handle) as url, Workers(tmp_path, env) as workers:
        delivery_ids = publish(sessions, settings, [url], 30)
        first = workers.start()
        killer.kill = lambda: workers.kill(first)
        workers.until(lambda: first.poll() is not None, "the receiver killing the worker", 30)
        assert first.wait(timeout=10) == -signal.SIGKILL
        at_kill = rows(sessions)
        workers.start()
        workers.until(
            lambda: count_settled(sessions) == len(delivery_ids), "every delivery made", 60
        )
    requests = killer.requests()
    assert set(requests) == delivery_ids
    assert sum(requests.values()) >= len(delivery_ids)
    assert_all_settled(sessions, delivery_ids)
    # Answered, but the worker died before recording it: it must have been sent again.
    unrecorded = {d for d in killer.answered_before_kill if at_kill[d].status != "succeeded"}
    assert all(requests[d] >= 2 for d in unrecorded), (unrecorded, requests)


def test_workers_side_by_side_deliver_each_delivery_exactly_once(
    postgres_database: str, tmp_path: Path
) -> None:
    """Three PostgreSQL workers, 5,000 deliveries, a healthy receiver: each arrives once."""
    settings = make_settings(postgres_database, tmp_path)
    engine = database.engine_for(settings)
    sessions = database.sessions(engine)
    tls = authority(tmp_path)
    env = worker_environment(postgres_database, tls.bundle, **PATIENT)
    try:
        with serving(tls) as receiver, Workers(tmp_path, env) as workers:
            side_by_side = [workers.start() for _ in range(3)]
            for worker in side_by_side:
                workers.ready(worker)
            delivery_ids = publish(sessions, settings, [receiver.url] * 5, 1000)
            workers.until(
                lambda: count_settled(sessions) == len(delivery_ids), "5000 deliveries", 60
            )
            for worker in side_by_side:
                workers.terminate(worker)
            assert [worker.wait(timeout=30) for worker in side_by_side] == [0, 0, 0]
        requests = Counter(r.headers["X-Service-Delivery"] for r in receiver.received)
        assert len(delivery_ids) == 5000
        assert set(requests) == delivery_ids
        assert [d for d, n in requests.items() if n != 1] == []
        final = rows(sessions)
        assert {(row.status, row.attempt, row.leased) for row in final.values()} == {
            ("succeeded", 1, False)
        }
        assert "Traceback" not in workers.outputs(), workers.outputs()
    finally:
        engine.dispose()


def test_workers_side_by_side_keep_an_endpoints_max_rate(
    postgres_database: str, tmp_path: Path
) -> None:
    """Three PostgreSQL workers, one endpoint at max rate 10: one worker at a time holds its
    lane, so together they send no faster than one would (at most one attempt early when
    the lane changes hands)."""
    settings = make_settings(postgres_database, tmp_path)
    engine = database.engine_for(settings)
    sessions = database.sessions(engine)
    tls = authority(tmp_path)
    env = worker_environment(postgres_database, tls.bundle)
    try:
        with serving(tls) as receiver, Workers(tmp_path, env) as workers:
            delivery_ids = publish(sessions, settings, [receiver.url], 30)
            with sessions.begin() as session:
                (endpoint,) = session.scalars(select(Endpoint)).all()
                endpoints.update_endpoint(
                    session,
                    endpoint.club_id,
                    endpoint.id,
                    timestamps.utc_now(),
                    settings,
                    max_rate=10,
                )
            for _ in range(3):
                workers.start()
            workers.until(lambda: count_settled(sessions) == len(delivery_ids), "30 deliveries")
        arrivals = sorted(r.at for r in receiver.received)
        assert len(arrivals) == 30
        # Any eleven in a row span a second when sent (ten gaps of 0.1 s): allow one early
        # attempt at a handover and the network's jitter.
        spans = [arrivals[n + 10] - arrivals[n] for n in range(len(arrivals) - 10)]
        assert min(spans) >= 0.8, spans
    finally:
        engine.dispose()


def test_sigterm_finishes_the_attempts_in_flight(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """SIGTERM: the worker records the attempts in flight, gives back the jobs waiting behind
    them unattempted (another worker takes them at once), leaves nothing leased, exits 0."""
    tls = authority(tmp_path)
    env = worker_environment(
        settings.database_url,
        tls.bundle,
        CLUBWIRE_LEASE_SECONDS="10",
        CLUBWIRE_ATTEMPT_TIMEOUT="5",
    )
    with serving(tls, delay=1.0) as receiver, Workers(tmp_path, env) as workers:
        delivery_ids = publish(sessions, settings, [receiver.url], 30)
        worker = workers.start()
        workers.until(lambda: receiver.received and leased(sessions), "attempts in flight")
        in_flight = {r.headers["X-Service-Delivery"] for r in list(receiver.received)}
        workers.terminate(worker)
        assert worker.wait(timeout=30) == 0, workers.outputs()
        assert in_flight, "SIGTERM came with no attempt in flight"
        final = rows(sessions)
    requests = Counter(r.headers["X-Service-Delivery"] for r in receiver.received)
    assert set(final) == delivery_ids
    assert [row for row in final.values() if row.leased] == []
    succeeded = {d for d, row in final.items() if row.status == "succeeded"}
    assert in_flight <= succeeded
    assert succeeded < delivery_ids, "the jobs waiting for room were attempted, not given back"
    assert succeeded == set(requests)
    assert set(requests.values()) == {1}
    assert {(row.status, row.attempt) for d, row in final.items() if d not in succeeded} <= {
        ("pending", 0)
    }
    assert "Traceback" not in workers.output(worker), workers.output(worker)


@pytest.mark.parametrize("role", ["worker", "serve"])
def test_a_second_ctrl_c_stops_at_once_and_loses_nothing(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path, role: str
) -> None:
    """Ctrl-C waits for the attempts in flight; a second one ends the process at once, in one
    line and without a traceback, and leaves those deliveries leased, to be made again."""
    if role == "serve" and not settings.is_sqlite:
        pytest.skip("serve delivers in its own process on SQLite only")
    tls = authority(tmp_path)
    env = worker_environment(
        settings.database_url,
        tls.bundle,
        CLUBWIRE_LEASE_SECONDS="120",
        CLUBWIRE_ATTEMPT_TIMEOUT="60",
    )
    command = ["serve", "--port", str(free_port())] if role == "serve" else []
    with serving(tls, hang=True) as receiver, Workers(tmp_path, env) as workers:
        delivery_ids = publish(sessions, settings, [receiver.url], 3)
        process = workers.start(*command)
        receiver.wait_for(3, timeout=30)
        workers.interrupt(process)
        with pytest.raises(subprocess.TimeoutExpired):
            process.wait(timeout=1)  # the graceful stop waits for the receiver's answers
        workers.interrupt(process)
        assert process.wait(timeout=20) == interrupts.EXIT_CODE, workers.output(process)
        output = workers.output(process)
    assert output.splitlines()[-1] == interrupts.MESSAGE
    assert "Traceback" not in output, output
    final = rows(sessions)
    assert set(final) == delivery_ids
    assert {(row.status, row.attempt, row.leased) for row in final.values()} == {
        ("pending", 0, True)
    }


def test_on_sqlite_a_second_worker_process_refuses_to_start(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """On SQLite exactly one worker runs: a second one says so in one line and exits 1."""
    path = tmp_path / "clubwire.db"
    shutil.copyfile(sqlite_template, path)
    tls = authority(tmp_path)
    env = worker_environment(f"sqlite:///{path}", tls.bundle)
    with Workers(tmp_path, env) as workers:
        running = workers.start()
        workers.ready(running)
        second = subprocess.run(
            [sys.executable, "-m", "clubwire", "worker"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert running.poll() is None
    assert second.returncode == 1
    (line,) = second.stderr.splitlines()
    assert line.startswith("clubwire: error: ")
    assert "exactly one" in line
    assert second.stdout == ""
