"""The migrations build exactly the schema the models describe, on each database."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, func, inspect, select, text, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.services import endpoints
from clubwire.services.club_api import keys
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage import database, migrate
from clubwire.storage.models import Base, Club, Delivery, QueueHead, on_database
from tests.conftest import make_settings
from tests.factories import (
    EPOCH,
    make_club,
    make_endpoint,
    make_key,
    make_program,
    queue_order,
    receiver_settings,
    registration,
)


def test_database_is_at_head(engine: Engine) -> None:
    assert migrate.current(engine) == migrate.head()


def test_models_and_migrations_agree(engine: Engine) -> None:
    with engine.connect() as connection:
        dialect_name = connection.dialect.name
        options = {
            "compare_type": True,
            "include_object": lambda item, *_: on_database(item, dialect_name),
        }
        context = MigrationContext.configure(connection, opts=options)
        assert compare_metadata(context, Base.metadata) == []


def test_upgrade_is_idempotent(engine: Engine) -> None:
    migrate.upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= {"clubs", "programs", "api_keys"}


def test_an_unmigrated_database_is_refused(tmp_path: Path) -> None:
    engine = database.engine_for(make_settings(f"sqlite:///{tmp_path / 'empty.db'}", tmp_path))
    try:
        with pytest.raises(errors.NotMigrated, match="clubwire migrate"):
            migrate.require_head(engine)
        migrate.upgrade(engine)
        migrate.require_head(engine)
    finally:
        engine.dispose()


def _move(engine: Engine, revision: str, *, down: bool = False) -> None:
    """Upgrade (or downgrade) the schema to ``revision``, as ``migrate.upgrade`` does."""
    config = Config()
    config.set_main_option("script_location", str(migrate.MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        (command.downgrade if down else command.upgrade)(config, revision)


def _endpoint_columns(engine: Engine) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns("endpoints")}


def test_0006_max_rate_goes_and_comes_back_keeping_endpoints_and_deliveries(
    engine: Engine, sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Down to 0005 the column goes, and nothing else (on SQLite, rebuilding the endpoints
    table would delete their deliveries with it: foreign keys cascade); back up, the
    endpoints there before have no max rate."""
    with sessions.begin() as session:
        club = make_club(session)
        url, kinds = "https://127.0.0.1/x", ["registration.created"]
        hooks = receiver_settings(settings)
        endpoints.create_endpoint(session, club, url, kinds, EPOCH, hooks, max_rate=20)
        events.publish(session, club, "registration.created", registration(), EPOCH)
    _move(engine, "0005", down=True)
    assert "max_rate" not in _endpoint_columns(engine)
    with engine.connect() as connection:
        assert connection.scalar(text("SELECT url FROM endpoints")) == url
        assert connection.scalar(select(func.count()).select_from(Delivery)) == 1
    _move(engine, "0006")
    with engine.connect() as connection:
        assert connection.execute(text("SELECT url, max_rate FROM endpoints")).one() == (url, None)
        assert connection.scalar(select(func.count()).select_from(Delivery)) == 1
    _move(engine, "head")
    assert migrate.current(engine) == migrate.head()


def test_0007_fills_the_queue_heads_and_keeps_every_delivery_and_attempt(
    engine: Engine, sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Up from 0006 each endpoint with unfinished deliveries gets a head due at the earliest
    of them; ``deliveries.lease_until`` goes (leases move to the heads) without rebuilding
    the table, which on SQLite would delete every attempt with it; down and up again, the
    same."""
    with sessions.begin() as session:
        club = make_club(session)
        hooks, kinds = receiver_settings(settings), ["registration.created"]
        waiting, finished = (
            endpoints.create_endpoint(session, club, f"https://127.0.0.1/{n}", kinds, EPOCH, hooks)[
                0
            ].id
            for n in range(2)
        )
    _move(engine, "0006", down=True)
    rows = [  # id, endpoint, status, next attempt (seconds after EPOCH), with an attempt
        ("dlv_late", waiting, "pending", 90, True),
        ("dlv_soon", waiting, "pending", 30, False),
        ("dlv_done", finished, "succeeded", None, True),
    ]
    with engine.begin() as connection:
        connection.execute(
            text(
                "INSERT INTO events (id, club_id, kind, body, created_at) "
                "VALUES ('evt_1', :club, 'registration.created', :body, :at)"
            ),
            {"club": club.id, "body": b"{}", "at": EPOCH},
        )
        for delivery_id, endpoint_id, status, due, attempted in rows:
            connection.execute(
                text(
                    "INSERT INTO deliveries (id, club_id, event_id, endpoint_id, status, attempt,"
                    " next_attempt_at, next_trigger, lease_until, created_at, updated_at)"
                    " VALUES (:id, :club, 'evt_1', :endpoint, :status, 1, :due, 'scheduled',"
                    " :at, :at, :at)"
                ),
                {
                    "id": delivery_id,
                    "club": club.id,
                    "endpoint": endpoint_id,
                    "status": status,
                    "due": None if due is None else EPOCH + timedelta(seconds=due),
                    "at": EPOCH,
                },
            )
            if attempted:
                connection.execute(
                    text(
                        "INSERT INTO attempts (delivery_id, number, trigger, started_at,"
                        " duration_ms, excerpt) VALUES (:id, 1, 'scheduled', :at, 5, '')"
                    ),
                    {"id": delivery_id, "at": EPOCH},
                )
    for revision, down in (("0007", False), ("0006", True), ("0007", False)):
        _move(engine, revision, down=down)
        with engine.connect() as connection:
            assert connection.scalar(text("SELECT count(*) FROM deliveries")) == 3
            assert connection.scalar(text("SELECT count(*) FROM attempts")) == 2
    assert "lease_until" not in {c["name"] for c in inspect(engine).get_columns("deliveries")}
    with sessions() as session:
        heads = session.execute(select(QueueHead.endpoint_id, QueueHead.next_due_at)).all()
    assert heads == [(waiting, EPOCH + timedelta(seconds=30))]
    _move(engine, "head")


def _key_columns(engine: Engine) -> set[str]:
    return {column["name"] for column in inspect(engine).get_columns("api_keys")}


def test_0008_key_use_and_expiry_go_and_come_back_keeping_every_key(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    """Up from 0007 the keys there never expire and have no recorded address or client; down
    the three columns go, and no key with them; up again, the same."""
    added = {"expires_at", "last_used_ip", "last_used_user_agent"}
    with sessions.begin() as session:
        record, _ = make_key(session, make_club(session), name="Website")
        keys.note_use(session, record.id, EPOCH, "203.0.113.7", "club-site/1.0")
    _move(engine, "0007", down=True)
    assert added.isdisjoint(_key_columns(engine))
    with engine.connect() as connection:
        assert connection.execute(text("SELECT id, name FROM api_keys")).one() == (
            record.id,
            "Website",
        )
    _move(engine, "0008")
    assert added <= _key_columns(engine)
    with engine.connect() as connection:
        row = connection.execute(
            text("SELECT name, expires_at, last_used_ip, last_used_user_agent FROM api_keys")
        ).one()
    assert tuple(row) == ("Website", None, None, None)
    _move(engine, "head")
    assert migrate.current(engine) == migrate.head()


def test_0014_moves_the_queue_order_of_postgresql_into_its_table_and_back(
    engine: Engine, sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Up from 0013 on PostgreSQL, every delivery with an attempt due gets its entry and the
    deliveries' partial index goes; down, the index comes back and the table goes. SQLite
    keeps its index throughout."""
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = make_endpoint(session, club, settings)
        for _ in range(3):
            events.publish(session, club, "registration.created", registration(), EPOCH)
        session.execute(
            update(Delivery)
            .where(Delivery.id == _first_delivery(session))
            .values(status="succeeded", next_attempt_at=None)
        )
    postgres = engine.dialect.name == "postgresql"
    _move(engine, "0013", down=True)
    assert "queue_entries" not in inspect(engine).get_table_names()
    assert "ix_deliveries_pending" in _deliveries_indexes(engine)
    _move(engine, "head")
    assert ("queue_entries" in inspect(engine).get_table_names()) is postgres
    assert ("ix_deliveries_pending" in _deliveries_indexes(engine)) is not postgres
    if postgres:
        with engine.connect() as connection:
            entries, waiting = queue_order(connection)
            assert len(waiting) == 2
            assert entries == waiting
            assert {row[1] for row in waiting} == {endpoint.id}


def _first_delivery(session: Session) -> str:
    return session.scalars(select(Delivery.id).order_by(Delivery.id).limit(1)).one()


def _deliveries_indexes(engine: Engine) -> set[str]:
    return {str(index["name"]) for index in inspect(engine).get_indexes("deliveries")}


def test_0015_orders_the_queue_by_id_among_deliveries_due_at_once_and_back(
    engine: Engine,
) -> None:
    """Up from 0014, the queue's order (``queue_entries`` on PostgreSQL, the deliveries'
    partial index on SQLite) is indexed by due time, then delivery id; down, by due time."""
    table, delivery_id = (
        ("queue_entries", "delivery_id")
        if engine.dialect.name == "postgresql"
        else ("deliveries", "id")
    )
    _move(engine, "0014", down=True)
    assert _queue_order_columns(engine, table) == ["endpoint_id", _due(table)]
    _move(engine, "head")
    assert _queue_order_columns(engine, table) == ["endpoint_id", _due(table), delivery_id]


def _due(table: str) -> str:
    return "due_at" if table == "queue_entries" else "next_attempt_at"


def _queue_order_columns(engine: Engine, table: str) -> list[str]:
    """The columns of the one index of ``table`` that leads with the endpoint and due time."""
    (columns,) = [
        [str(column) for column in index["column_names"]]
        for index in inspect(engine).get_indexes(table)
        if index["column_names"][:2] == ["endpoint_id", _due(table)]
    ]
    return columns


def test_0016_keeps_every_price_and_refuses_to_go_down_past_one_integer_cannot_hold(
    engine: Engine, sessions: sessionmaker[Session]
) -> None:
    """Down to 0015 and up again, prices stay exact; up, the largest price the API takes
    is stored; with it there, the downgrade is refused by name and changes nothing."""
    with sessions.begin() as session:
        make_program(session, make_club(session), "prg_clinic", price="45.50")
    _move(engine, "0015", down=True)
    _move(engine, "head")
    with sessions.begin() as session:
        make_program(
            session, session.scalars(select(Club)).one(), "prg_bonspiel", price="99999999.99"
        )
    with pytest.raises(RuntimeError, match=r"1 program\(s\) cost 21,474,836\.48 or more"):
        _move(engine, "0015", down=True)
    assert migrate.current(engine) == migrate.head()
    with engine.connect() as connection:
        prices = connection.execute(text("SELECT id, price_cents FROM programs ORDER BY id"))
        assert prices.all() == [("prg_bonspiel", 9_999_999_999), ("prg_clinic", 4_550)]


def test_0018_reasons_become_codes_and_back_keeping_every_delivery(
    engine: Engine, sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Down to 0017 the reasons are words again and the new columns go, without rebuilding a
    table (on SQLite that would delete the deliveries: foreign keys cascade); up, the words
    stored before become codes, and any other words the code of staff."""
    with sessions.begin() as session:
        club = make_club(session)
        hooks = receiver_settings(settings)
        kinds = ["registration.created"]
        for path in ("dead", "user", "other"):
            endpoints.create_endpoint(
                session, club, f"https://127.0.0.1/{path}", kinds, EPOCH, hooks
            )
        events.publish(session, club, "registration.created", registration(), EPOCH)
    _move(engine, "0017", down=True)
    assert "headers_sealed" not in _endpoint_columns(engine)
    words = {
        "dead": "Switched off after 5 dead deliveries in a row",
        "user": "Switched off by a user",
        "other": "Switched off by an operator",
    }
    with engine.begin() as connection:
        assert connection.scalar(select(func.count()).select_from(Delivery)) == 3
        for path, reason in words.items():
            connection.execute(
                text("UPDATE endpoints SET disabled_reason = :reason WHERE url LIKE :path"),
                {"reason": reason, "path": f"%/{path}"},
            )
    _move(engine, "head")
    with engine.connect() as connection:
        stored = connection.execute(text("SELECT url, disabled_reason FROM endpoints")).all()
        reasons: dict[str, str] = {url: reason for url, reason in stored}
        assert connection.scalar(select(func.count()).select_from(Delivery)) == 3
    assert reasons == {
        "https://127.0.0.1/dead": "dead_in_a_row",
        "https://127.0.0.1/user": "staff",
        "https://127.0.0.1/other": "staff",
    }
