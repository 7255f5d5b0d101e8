"""PostgreSQL connection arguments (a connect timeout unless the URL sets one), and the
oldest SQLite the worker's statements run on."""

from __future__ import annotations

import pytest
from sqlalchemy.engine import make_url

from clubwire.errors import ConfigurationError
from clubwire.storage import database

URL = "postgresql+psycopg://clubwire@db.example:5432/clubwire"


def test_an_unreachable_server_is_given_up_on_after_the_timeout() -> None:
    args = database.postgres_connect_args(make_url(URL), worker=False)
    assert args == {"connect_timeout": database.CONNECT_TIMEOUT}


def test_the_urls_own_timeout_wins() -> None:
    args = database.postgres_connect_args(make_url(f"{URL}?connect_timeout=3"), worker=False)
    assert "connect_timeout" not in args  # psycopg takes it from the URL


def test_a_worker_also_commits_without_waiting_for_the_flush() -> None:
    args = database.postgres_connect_args(make_url(URL), worker=True)
    assert args == {
        "connect_timeout": database.CONNECT_TIMEOUT,
        **database.WORKER_POSTGRES_OPTIONS,
    }


def test_an_sqlite_without_returning_is_refused_by_name() -> None:
    with pytest.raises(ConfigurationError, match=r"SQLite 3\.35\.0 or later .* SQLite 3\.31\.1"):
        database.require_sqlite((3, 31, 1))
    database.require_sqlite((3, 35, 0))
