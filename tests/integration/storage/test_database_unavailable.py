"""``database.unavailable`` on real errors: what says "not now" (503, try again) and what is a
fault (500). Each error is made by the driver itself, against real SQLite files and the
shared PostgreSQL server (only this test's own connections are harmed)."""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
import sqlalchemy.exc
from sqlalchemy import create_engine, text

from clubwire.storage import database
from tests import conftest
from tests.ports import free_port

DRIVER_ERRORS = (sqlite3.Error, psycopg.Error, sqlalchemy.exc.SQLAlchemyError)


def _raised(action: Callable[[], object]) -> BaseException:
    with pytest.raises(DRIVER_ERRORS) as caught:
        action()
    return caught.value


def _sqlite_locked(tmp_path: Path) -> BaseException:
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("CREATE TABLE t (x)")
    holder.execute("BEGIN IMMEDIATE")
    waiter = sqlite3.connect(path, timeout=0)
    try:
        return _raised(lambda: waiter.execute("INSERT INTO t VALUES (1)"))
    finally:
        waiter.close()
        holder.close()


def _sqlite_cannot_open(tmp_path: Path) -> BaseException:
    return _raised(lambda: sqlite3.connect(tmp_path).execute("SELECT 1"))  # a folder


def _sqlite_no_such_table(tmp_path: Path) -> BaseException:
    return _raised(lambda: sqlite3.connect(tmp_path / "empty.db").execute("SELECT * FROM t"))


def _postgres_refused(_tmp_path: Path) -> BaseException:
    return _raised(lambda: psycopg.connect(f"postgresql://postgres@127.0.0.1:{free_port()}/x"))


def _postgres_terminated(_tmp_path: Path) -> BaseException:
    """The server ends the session, as when it shuts down (57P01, or the socket closing)."""
    with _postgres() as victim, _postgres() as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (victim.info.backend_pid,))
        return _raised(lambda: victim.execute("SELECT 1"))


def _postgres_deadlocked(_tmp_path: Path) -> BaseException:
    """Two transactions, each holding a lock the other waits for: PostgreSQL ends one of
    them (40P01), which run again would succeed."""
    with _postgres() as first, _postgres() as second:
        first.execute("BEGIN")
        second.execute("BEGIN")
        first.execute("SELECT pg_advisory_xact_lock(1)")
        second.execute("SELECT pg_advisory_xact_lock(2)")
        errors: list[BaseException] = []

        def wait(connection: psycopg.Connection[tuple[object, ...]], key: int) -> None:
            try:
                connection.execute("SELECT pg_advisory_xact_lock(%s)", (key,))
            except psycopg.Error as error:
                errors.append(error)
            connection.execute("ROLLBACK")

        waiting = threading.Thread(target=wait, args=(first, 2))
        waiting.start()
        wait(second, 1)
        waiting.join(30)
        assert len(errors) == 1
        return errors[0]


def _postgres_cancelled(_tmp_path: Path) -> BaseException:
    """A statement timeout: an OperationalError too (57014), but about this statement."""
    with _postgres() as connection:
        connection.execute("SET statement_timeout = 1")
        return _raised(lambda: connection.execute("SELECT pg_sleep(5)"))


def _postgres_no_such_table(_tmp_path: Path) -> BaseException:
    with _postgres() as connection:
        return _raised(lambda: connection.execute("SELECT * FROM no_such_table"))


def _pool_timeout(tmp_path: Path) -> BaseException:
    engine = create_engine(
        f"sqlite:///{tmp_path / 'pool.db'}", pool_size=1, max_overflow=0, pool_timeout=0.01
    )
    try:
        with engine.connect():
            return _raised(engine.connect)
    finally:
        engine.dispose()


def _wrapped_refusal(_tmp_path: Path) -> BaseException:
    engine = create_engine(f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/x")
    return _raised(engine.connect)


def _wrapped_no_such_table(tmp_path: Path) -> BaseException:
    engine = create_engine(f"sqlite:///{tmp_path / 'empty.db'}")
    with engine.connect() as connection:
        return _raised(lambda: connection.execute(text("SELECT * FROM t")))


def _postgres() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(conftest.POSTGRES_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        if conftest.REQUIRE_POSTGRES:
            pytest.fail(f"PostgreSQL is unreachable: {exc}")
        pytest.skip(f"PostgreSQL is unreachable: {exc}")


UNAVAILABLE = [
    _sqlite_locked,
    _sqlite_cannot_open,
    _postgres_refused,
    _postgres_terminated,
    _pool_timeout,
    _wrapped_refusal,
    _postgres_deadlocked,
]
FAULTS = [
    _sqlite_no_such_table,
    _postgres_cancelled,
    _postgres_no_such_table,
    _wrapped_no_such_table,
]


@pytest.mark.parametrize("make", UNAVAILABLE, ids=lambda make: make.__name__.lstrip("_"))
def test_the_database_being_unavailable_is_recognised(
    make: Callable[[Path], BaseException], tmp_path: Path
) -> None:
    assert database.unavailable(make(tmp_path))


@pytest.mark.parametrize("make", FAULTS, ids=lambda make: make.__name__.lstrip("_"))
def test_other_database_errors_are_faults(
    make: Callable[[Path], BaseException], tmp_path: Path
) -> None:
    assert not database.unavailable(make(tmp_path))


def test_only_a_lost_race_is_a_conflict(tmp_path: Path) -> None:
    """What ``database.transact`` runs again: a deadlock, not an outage nor a fault."""
    deadlock = _postgres_deadlocked(tmp_path)
    wrapped = sqlalchemy.exc.OperationalError("SELECT 1", {}, deadlock)  # as SQLAlchemy raises
    assert database.conflicted(wrapped)
    others = [make(tmp_path) for make in [*FAULTS, *UNAVAILABLE[:-1]]]
    assert not any(database.conflicted(error) for error in others)
