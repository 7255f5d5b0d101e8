"""A write that loses a race with another transaction (a deadlock, a serialization failure)
is run again inside the service; one that keeps losing answers 503 with Retry-After, never
500 (issue 31). PostgreSQL itself raises the conflicts: a trigger of the test's own makes the
first inserts of events fail with the SQLSTATE a real deadlock has, as often as it is told."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from clubwire.storage import database
from clubwire.storage.models import Event
from clubwire.web.app import create_app
from tests.conftest import PLATFORM_TOKEN, make_settings
from tests.factories import FakeClock, registration

AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
CLUB = "/internal/v1/clubs/granite"


def _losing(url: str, times: int, sqlstate: str) -> None:
    """Make the database's next ``times`` inserts of events fail with ``sqlstate``."""
    with psycopg.connect(url.replace("postgresql+psycopg", "postgresql"), autocommit=True) as db:
        db.execute("CREATE SEQUENCE lost_races")
        db.execute(
            f"""
            CREATE FUNCTION lose_a_race() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                IF nextval('lost_races') <= {times} THEN
                    RAISE EXCEPTION 'lost a race' USING ERRCODE = '{sqlstate}';
                END IF;
                RETURN NEW;
            END $$
            """
        )
        db.execute(
            "CREATE TRIGGER lose_a_race BEFORE INSERT ON events "
            "FOR EACH ROW EXECUTE FUNCTION lose_a_race()"
        )


def _tries(url: str) -> int:
    """How many inserts of events were tried (each transaction's, committed or not)."""
    with psycopg.connect(url, autocommit=True) as db:
        row = db.execute("SELECT last_value, is_called FROM lost_races").fetchone()
    assert row is not None
    last, called = row
    return int(last) if called else 0


@pytest.fixture
def client(postgres_database: str, tmp_path: Path) -> Iterator[TestClient]:
    settings = make_settings(postgres_database, tmp_path)
    with TestClient(create_app(settings, FakeClock()), raise_server_exceptions=False) as client:
        client.put(CLUB, json={"name": "Granite"}, headers=AUTH)
        client.put(f"{CLUB}/modules/webhooks", json={"enabled": True}, headers=AUTH)
        yield client


def _events(url: str) -> int:
    engine = database.engine_for(make_settings(url, Path()))
    try:
        with database.sessions(engine)() as session:
            return session.scalar(select(func.count()).select_from(Event)) or 0
    finally:
        engine.dispose()


@pytest.mark.parametrize("sqlstate", ["40P01", "40001"], ids=["deadlock", "serialization"])
def test_a_publish_that_loses_a_few_races_is_run_again_and_created(
    client: TestClient, postgres_database: str, sqlstate: str
) -> None:
    _losing(postgres_database, database.CONFLICT_ATTEMPTS - 1, sqlstate)
    body = {"event": "registration.created", "data": registration()}
    response = client.post(f"{CLUB}/events", json=body, headers=AUTH)
    assert response.status_code == 201, response.text
    assert _tries(postgres_database) == database.CONFLICT_ATTEMPTS
    assert _events(postgres_database) == 1


def test_a_publish_that_keeps_losing_answers_503_with_retry_after(
    client: TestClient, postgres_database: str
) -> None:
    _losing(postgres_database, 1000, "40P01")
    body = {"event": "registration.created", "data": registration()}
    response = client.post(f"{CLUB}/events", json=body, headers=AUTH)
    assert response.status_code == 503, response.text
    assert response.headers["Retry-After"].isdigit()
    assert response.headers["Content-Type"] == "application/problem+json"
    assert response.json()["code"] == "database_unavailable"
    assert _tries(postgres_database) == database.CONFLICT_ATTEMPTS
    assert _events(postgres_database) == 0


def test_a_fault_is_not_run_again(client: TestClient, postgres_database: str) -> None:
    """A broken constraint (here, a check of the trigger's own) is a fault: tried once, 500."""
    _losing(postgres_database, 1000, "23514")
    body = {"event": "registration.created", "data": registration()}
    response = client.post(f"{CLUB}/events", json=body, headers=AUTH)
    assert response.status_code == 500
    assert _tries(postgres_database) == 1
