"""The services' PostgreSQL connections are pinged before use only after waiting in the pool
(``database.PING_AFTER_IDLE``): a connection the server ended while it waited is replaced,
unseen by the request; under load (used again at once) none is pinged."""

from __future__ import annotations

import psycopg
import pytest
import sqlalchemy.exc
from sqlalchemy import Engine, text

from clubwire.settings import Settings
from clubwire.storage import database


def _terminate_pooled(engine: Engine) -> None:
    """End the pooled connection's session on the server, as a restart would."""
    with engine.connect() as connection:
        pid = connection.execute(text("SELECT pg_backend_pid()")).scalar_one()
    url = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))


def test_a_connection_ended_while_it_waited_is_replaced_unseen(
    settings: Settings, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    if settings.is_sqlite:
        pytest.skip("PostgreSQL's connections")
    monkeypatch.setattr(database, "PING_AFTER_IDLE", 0.0)  # every connection has waited
    _terminate_pooled(engine)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT 1")).scalar_one() == 1


def test_a_connection_used_again_at_once_is_not_pinged(
    settings: Settings, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """So a connection broken under load fails one use (an error the web answers with a
    503), and the next gets a new one."""
    if settings.is_sqlite:
        pytest.skip("PostgreSQL's connections")
    monkeypatch.setattr(database, "PING_AFTER_IDLE", 3600.0)
    _terminate_pooled(engine)
    with pytest.raises(sqlalchemy.exc.OperationalError) as raised, engine.connect() as broken:
        broken.execute(text("SELECT 1"))
    assert database.unavailable(raised.value)
    with engine.connect() as connection:
        assert connection.execute(text("SELECT 1")).scalar_one() == 1
