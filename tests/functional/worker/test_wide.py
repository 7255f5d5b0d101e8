"""Workers side by side over many endpoints due at once (issue 38): each leases more lanes a
round while it finds all it asks for, and still leaves the others theirs. Real ``clubwire
worker`` processes on PostgreSQL, woken together by one publish's ``NOTIFY``."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.settings import Settings
from tests.factories import make_club, registration
from tests.functional.workers import PATIENT, Workers, count_settled, worker_environment
from tests.receiver import Authority, serving

pytestmark = pytest.mark.slow

CLUBS, ENDPOINTS, EVENTS = 5, 20, 5  # 100 endpoints (a club holds at most 20), 500 deliveries


def publish_wide(sessions: sessionmaker[Session], settings: Settings, url: str) -> int:
    """``CLUBS`` clubs of ``ENDPOINTS`` endpoints at ``url``, each club ``EVENTS`` events, all
    in one transaction (so one ``NOTIFY`` wakes every worker at once); the deliveries made."""
    hooks = settings.model_copy(update={"allow_private_targets": True})
    now = timestamps.utc_now()
    with sessions.begin() as session:
        for number in range(CLUBS):
            club = make_club(session, f"wide-{number}")
            for _ in range(ENDPOINTS):
                endpoints.create_endpoint(session, club, url, ["registration.created"], now, hooks)
            for _ in range(EVENTS):
                events.publish(session, club, "registration.created", registration(), now)
    return CLUBS * ENDPOINTS * EVENTS


def attempted(output: str) -> list[str]:
    """The delivery ids of a worker's attempt lines."""
    lines = (json.loads(line) for line in output.splitlines() if line.startswith("{"))
    return [line["delivery_id"] for line in lines if line.get("event") == "attempt"]


@pytest.fixture
def database_url(postgres_database: str) -> str:
    """PostgreSQL only: on SQLite one worker runs at a time."""
    return postgres_database


def test_workers_woken_together_over_many_endpoints_all_work_and_none_twice(
    settings: Settings, sessions: sessionmaker[Session], tls: Authority, tmp_path: Path
) -> None:
    # 16 in flight: one worker alone takes seconds over 500 deliveries answered in 50 ms, so a
    # worker the busy machine wakes late still finds lanes due (it must never find none
    # because the other leased every lane before it woke).
    env = worker_environment(
        settings.database_url, tls.bundle, CLUBWIRE_MAX_IN_FLIGHT="16", **PATIENT
    )
    with serving(tls, delay=0.05) as receiver, Workers(tmp_path, env) as workers:
        side_by_side = [workers.start() for _ in range(2)]
        for worker in side_by_side:
            workers.ready(worker)
        total = publish_wide(sessions, settings, receiver.url)
        workers.until(lambda: count_settled(sessions) == total, f"{total} deliveries", 60)
        for worker in side_by_side:
            workers.terminate(worker)
        assert [worker.wait(timeout=30) for worker in side_by_side] == [0, 0]
        by_worker = [attempted(workers.output(worker)) for worker in side_by_side]
    requests = Counter(r.headers["X-Service-Delivery"] for r in receiver.received)
    assert len(requests) == total
    assert [d for d, n in requests.items() if n != 1] == []
    assert all(by_worker), [len(ids) for ids in by_worker]  # neither left idle
    first, second = (set(ids) for ids in by_worker)
    assert first.isdisjoint(second)
    assert first | second == set(requests)
    assert "Traceback" not in workers.outputs(), workers.outputs()
