"""The database goes away under a running ``clubwire serve`` and comes back.

Meanwhile every route that needs it answers 503 with ``Retry-After`` (problem+json, or the
settings area's HTML page) and logs one warning line per request, without a traceback; once
it is back the same requests succeed, without restarting the server, and nothing was half
written. PostgreSQL here is a cluster of the test's own (``tests/private_postgres.py``): the
shared server is never stopped.
"""

from __future__ import annotations

import http.client
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import make_url, select

from clubwire import errors
from clubwire.domain import timestamps
from clubwire.services.staff import web_sessions
from clubwire.settings import Settings
from clubwire.storage import database
from clubwire.storage.models import User
from clubwire.web import problems
from clubwire.web.app import create_app
from clubwire.web.ui import security
from tests import conftest
from tests.factories import FakeClock, make_club, make_key, make_staff, program_data, registration
from tests.functional import processes
from tests.ports import free_port
from tests.private_postgres import Cluster

SLUG = "granite"
ADMIN = "admin@granite.example"
PROGRAM = "spring-league"
WARNING = "the database is unavailable (psycopg.OperationalError): answered 503"
Call = tuple[str, str, dict[str, str], bytes]


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Served:
    """A ``clubwire serve`` process on the test's own cluster, and the credentials it knows."""

    server: processes.Clubwire
    port: int
    key: str
    cookie: str

    def call(self, method: str, path: str, headers: dict[str, str], body: bytes) -> Answer:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request(method, path, body or None, headers)
            response = connection.getresponse()
            answer = {name.lower(): value for name, value in response.getheaders()}
            return Answer(response.status, answer, response.read())
        finally:
            connection.close()

    def logged(self) -> list[dict[str, Any]]:
        """Every whole line the server has written to stderr, but the per-request lines."""
        text = self.server.err
        whole = text[: text.rfind("\n") + 1].splitlines()
        lines = [orjson.loads(line) for line in whole]  # every line is JSON: no bare traceback
        return [line for line in lines if line.get("event") != "request"]


@pytest.fixture
def served(own_postgres: Cluster, tmp_path: Path) -> Iterator[Served]:
    url = own_postgres.url()
    key, cookie = _world(conftest.make_settings(url, tmp_path))
    port = free_port()
    env = processes.environment(
        tmp_path,
        CLUBWIRE_DATABASE_URL=url,
        CLUBWIRE_SECRET_KEY=conftest.SECRET_KEY,
        CLUBWIRE_PLATFORM_TOKEN=conftest.PLATFORM_TOKEN,
        CLUBWIRE_PUBLIC_URL=f"http://127.0.0.1:{port}",
    )
    with processes.clubwire(tmp_path, env, "serve", "--port", str(port)) as server:
        processes.wait_for(f"http://127.0.0.1:{port}/readyz", {})
        yield Served(server, port, key, cookie)


def _world(settings: Settings) -> tuple[str, str]:
    """A club with an API key, and a signed-in club admin: the key and the session cookie."""
    engine = database.engine_for(settings)
    sessions = database.sessions(engine)
    with sessions.begin() as session:
        _, key = make_key(session, make_club(session, SLUG))
    make_staff(sessions, ADMIN, clubs=[SLUG])
    with sessions.begin() as session:
        user = session.scalars(select(User)).one()
        cookie = web_sessions.start(session, user, timestamps.utc_now())
    engine.dispose()
    return key, cookie


def _calls(served: Served, idempotency_key: str) -> dict[str, Call]:
    """One request of each kind that needs the database."""
    platform = {"Authorization": f"Bearer {conftest.PLATFORM_TOKEN}"}
    as_json = {**platform, "Content-Type": "application/json"}
    event = orjson.dumps({"event": "registration.created", "data": registration()})
    return {
        "publish": (
            "POST",
            f"/internal/v1/clubs/{SLUG}/events",
            {**as_json, "Idempotency-Key": idempotency_key},
            event,
        ),
        "put program": (
            "PUT",
            f"/internal/v1/clubs/{SLUG}/programs/{PROGRAM}",
            as_json,
            orjson.dumps(program_data()),
        ),
        "delete program": (
            "DELETE",
            f"/internal/v1/clubs/{SLUG}/programs/gone",
            platform,
            b"",
        ),
        "club API": (
            "GET",
            f"/clubs/{SLUG}/api/v1/programs",
            {"Authorization": f"Bearer {served.key}"},
            b"",
        ),
        "settings page": (
            "GET",
            f"/settings/{SLUG}/webhooks",
            {"Cookie": f"{security.SESSION_COOKIE}={served.cookie}"},
            b"",
        ),
        "readyz": ("GET", "/readyz", {}, b""),
    }


def _statuses(served: Served, idempotency_key: str) -> dict[str, int]:
    return {
        name: served.call(*call).status for name, call in _calls(served, idempotency_key).items()
    }


UP = {
    "publish": 201,
    "put program": 201,
    "delete program": 204,
    "club API": 200,
    "settings page": 200,
    "readyz": 200,
}


def _assert_unavailable(name: str, answer: Answer, port: int) -> None:
    assert (name, answer.status, answer.headers["retry-after"]) == (name, 503, "5")
    if name == "settings page":
        assert answer.headers["content-type"].startswith("text/html")
        assert errors.DatabaseUnavailable().detail.encode() in answer.body
        return
    assert answer.headers["content-type"] == problems.MEDIA_TYPE
    problem = orjson.loads(answer.body)
    assert problem["code"] == "database_unavailable", name
    assert problem["detail"] == errors.DatabaseUnavailable().detail
    assert b"127.0.0.1" not in answer.body
    assert str(port).encode() not in answer.body


def test_while_postgresql_is_down_every_route_answers_503_and_then_recovers(
    served: Served, own_postgres: Cluster
) -> None:
    before = _calls(served, "first")
    assert {name: served.call(*call).status for name, call in before.items()} == UP
    logged = len(served.logged())

    own_postgres.stop()
    during = _calls(served, "second")
    for name, call in during.items():
        _assert_unavailable(name, served.call(*call), own_postgres.port)
    new_lines = served.logged()[logged:]
    assert [line["message"] for line in new_lines] == [WARNING] * len(during)
    assert all(line["level"] == "warning" and "error" not in line for line in new_lines)
    assert "Traceback" not in served.server.err

    own_postgres.start()
    after = _statuses(served, "second")
    assert after == UP | {"put program": 200}  # it was created before the outage
    assert served.server.process.poll() is None  # the same process: never restarted
    assert _rows(own_postgres) == (2, 1)  # events, programs: nothing half written


def test_after_a_restart_the_very_next_requests_succeed(
    served: Served, own_postgres: Cluster
) -> None:
    """Every connection kept from before the restart is dead: none of them is an error."""
    assert _statuses(served, "first") == UP
    own_postgres.stop()
    own_postgres.start()
    assert _statuses(served, "second") == UP | {"put program": 200}
    assert [line for line in served.logged() if line["level"] != "info"] == []


def test_a_fault_is_logged_once_with_its_traceback(served: Served, own_postgres: Cluster) -> None:
    """Not the database being away: a bug (here, a table gone). Starlette answered such a
    500 and raised it again for uvicorn to log a second time."""
    with psycopg.connect(own_postgres.url(), autocommit=True) as admin:
        admin.execute("ALTER TABLE events RENAME TO events_elsewhere")
    answer = served.call(*_calls(served, "first")["publish"])
    assert answer.status == 500
    assert orjson.loads(answer.body)["code"] == "internal_error"
    assert (
        served.server.interrupt() == 0
    )  # all said: uvicorn logged its second line after the answer
    (line,) = [line for line in served.logged() if line["level"] != "info"]
    assert (line["level"], line["message"]) == ("error", "unhandled error")
    assert line["error"].startswith("Traceback")
    assert "UndefinedTable" in line["error"]
    assert "Exception in ASGI application" not in served.server.err  # uvicorn's second log


def _rows(cluster: Cluster) -> tuple[int, int]:
    """How many events and programs the database holds."""
    with psycopg.connect(cluster.url()) as connection:
        found = connection.execute(
            "SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM programs)"
        ).fetchone()
    assert found is not None
    return found[0], found[1]


# ------------------------------------------------------------------ SQLite: locked, not down


@pytest.fixture
def sqlite_settings(sqlite_template: Path, tmp_path: Path) -> Settings:
    path = tmp_path / "clubwire.db"
    path.write_bytes(sqlite_template.read_bytes())
    return conftest.make_settings(f"sqlite:///{path}", tmp_path)


def test_a_sqlite_database_locked_past_its_busy_timeout_is_503(
    sqlite_settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    engine = database.engine_for(sqlite_settings)
    with database.sessions(engine).begin() as session:
        make_club(session, SLUG)
    engine.dispose()
    path = make_url(sqlite_settings.sqlalchemy_url).database
    assert path is not None
    app = create_app(sqlite_settings, FakeClock())
    platform = {"Authorization": f"Bearer {conftest.PLATFORM_TOKEN}"}
    body = {"event": "registration.created", "data": registration()}
    with TestClient(app) as client, _write_locked(path):
        answer = client.post(f"/internal/v1/clubs/{SLUG}/events", json=body, headers=platform)
    assert (answer.status_code, answer.headers["retry-after"]) == (503, "5")
    assert answer.json()["code"] == "database_unavailable"
    warnings = [r.getMessage() for r in caplog.records if r.name == problems.__name__]
    assert warnings == ["the database is unavailable (sqlite3.OperationalError): answered 503"]


@contextmanager
def _write_locked(path: str) -> Iterator[None]:
    """Another connection holding SQLite's write lock until the block ends."""
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        yield
        connection.execute("ROLLBACK")
    finally:
        connection.close()
