"""Publishing over the internal API beside busy workers on PostgreSQL: every publish is
answered 201, no statement deadlocks, and every delivery arrives (issue 31).

The workers lease, renew and give back the endpoints' queue heads while the publishes mark
the same heads due; both take them in one order (by endpoint id), and a conflict that still
happens is retried inside the service."""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import orjson
import pytest
from sqlalchemy import func, select

from clubwire.domain import timestamps
from clubwire.services import endpoints
from clubwire.storage import database
from clubwire.storage.models import Delivery
from tests.conftest import PLATFORM_TOKEN, make_settings
from tests.factories import make_club, registration
from tests.functional.processes import wait_for
from tests.functional.workers import (
    PATIENT,
    Workers,
    count_settled,
    worker_environment,
)
from tests.ports import free_port
from tests.receiver import authority, serving

pytestmark = pytest.mark.slow

PUBLISHERS = 8
ENDPOINTS = 20
SECONDS = 20.0


def _publishing(url: str, until: float, statuses: Counter[int], lock: threading.Lock) -> None:
    """Publish one event after another until ``until``, counting the answers' statuses."""
    body = orjson.dumps({"event": "registration.created", "data": registration()})
    headers = {"Authorization": f"Bearer {PLATFORM_TOKEN}", "Content-Type": "application/json"}
    while time.monotonic() < until:
        request = urllib.request.Request(url, body, headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                status = int(response.status)
        except urllib.error.HTTPError as error:
            status = error.code
        with lock:
            statuses[status] += 1


def test_publishes_beside_two_workers_are_all_created_without_a_deadlock(
    postgres_database: str, tmp_path: Path
) -> None:
    """8 publishers to 20 endpoints answering in 50 ms, beside 2 workers, for 20 s."""
    settings = make_settings(postgres_database, tmp_path)
    engine = database.engine_for(settings)
    sessions = database.sessions(engine)
    tls = authority(tmp_path)
    env = worker_environment(
        postgres_database, tls.bundle, CLUBWIRE_PLATFORM_TOKEN=PLATFORM_TOKEN, **PATIENT
    )
    hooks = settings.model_copy(update={"allow_private_targets": True})
    port = free_port()
    statuses: Counter[int] = Counter()
    lock = threading.Lock()
    try:
        with serving(tls, delay=0.05) as receiver, Workers(tmp_path, env) as processes:
            with sessions.begin() as session:
                club = make_club(session)
                for _ in range(ENDPOINTS):
                    endpoints.create_endpoint(
                        session, club, receiver.url, ["registration.created"],
                        timestamps.utc_now(), hooks,
                    )  # fmt: skip
            workers = [processes.start() for _ in range(2)]
            for worker in workers:
                processes.ready(worker)
            processes.start("serve", "--port", str(port))
            wait_for(f"http://127.0.0.1:{port}/readyz", {})
            url = f"http://127.0.0.1:{port}/internal/v1/clubs/granite/events"
            until = time.monotonic() + SECONDS
            publishers = [
                threading.Thread(target=_publishing, args=(url, until, statuses, lock))
                for _ in range(PUBLISHERS)
            ]
            for publisher in publishers:
                publisher.start()
            for publisher in publishers:
                publisher.join(SECONDS + 60)
            published = statuses[201]
            processes.until(
                lambda: count_settled(sessions) == published * ENDPOINTS, "every delivery", 90
            )
        output = processes.outputs()
        assert set(statuses) == {201}, (statuses, output)
        assert published > 100
        assert "deadlock" not in output.lower(), output
        assert "Traceback" not in output, output
        with sessions() as session:
            assert session.scalar(select(func.count()).select_from(Delivery)) == (
                published * ENDPOINTS
            )
    finally:
        engine.dispose()
