"""Shared fixtures: every database test runs on SQLite and on PostgreSQL.

Each test gets a fresh database copied from a template migrated once per run: a file copy
for SQLite, ``CREATE DATABASE … TEMPLATE`` for PostgreSQL. PostgreSQL comes from
``CLUBWIRE_TEST_POSTGRES_URL``; when it cannot be reached its tests are skipped with the
reason, unless ``CLUBWIRE_REQUIRE_POSTGRES=1`` (as in CI), which makes that a failure.
"""

from __future__ import annotations

import os
import secrets
import shutil
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from clubwire.settings import Settings
from clubwire.storage import database, migrate
from clubwire.web.app import create_app
from tests.factories import FakeClock

POSTGRES_URL = os.environ.get(
    "CLUBWIRE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
REQUIRE_POSTGRES = os.environ.get("CLUBWIRE_REQUIRE_POSTGRES") == "1"
PLATFORM_TOKEN = "platform-token-for-tests-0123456789"
SECRET_KEY = "test-secret-key-0123456789abcdefghijklmnop"


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3)


def _url_for(name: str) -> str:
    base, _, _ = POSTGRES_URL.rpartition("/")
    return f"{base}/{name}"


def make_settings(database_url: str, home: Path, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "database_url": database_url,
        "home": home,
        "secret_key": SECRET_KEY,
        "platform_token": PLATFORM_TOKEN,
        "_env_file": None,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Output a test captured, made fit to send to the run's main process (pytest-xdist
    sends it as UTF-8): logs tests write undecodable text on purpose (lone surrogates)."""
    report.sections = [(title, _sendable(text)) for title, text in report.sections]
    if isinstance(report.longrepr, str):
        report.longrepr = _sendable(report.longrepr)


def _sendable(text: str) -> str:
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("template") / "template.db"
    engine = database.engine_for(make_settings(f"sqlite:///{path}", path.parent))
    migrate.upgrade(engine)
    engine.dispose()
    return path


@pytest.fixture(scope="session")
def postgres_template() -> Iterator[str]:
    try:
        admin = _admin()
    except psycopg.OperationalError as exc:
        reason = f"PostgreSQL is unreachable at {POSTGRES_URL}: {str(exc).strip()}"
        if REQUIRE_POSTGRES:
            pytest.fail(f"{reason} (CLUBWIRE_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)
    name = f"clubwire_template_{secrets.token_hex(4)}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        engine = database.engine_for(make_settings(_url_for(name), Path(".")))
        migrate.upgrade(engine)
        engine.dispose()
        yield name
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def postgres_database(postgres_template: str) -> Iterator[str]:
    name = f"clubwire_test_{secrets.token_hex(6)}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{postgres_template}"')
        yield _url_for(name)
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def database_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        url: str = request.getfixturevalue("postgres_database")
        return url
    path = tmp_path / "clubwire.db"
    shutil.copyfile(request.getfixturevalue("sqlite_template"), path)
    return f"sqlite:///{path}"


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    return make_settings(database_url, tmp_path)


@pytest.fixture
def engine(settings: Settings) -> Iterator[Engine]:
    engine = database.engine_for(settings)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine: Engine) -> sessionmaker[Session]:
    return database.sessions(engine)


@pytest.fixture
def session(sessions: sessionmaker[Session]) -> Iterator[Session]:
    """A session whose work the test commits itself (``session.commit()``) when it must."""
    with sessions() as session:
        yield session


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(settings: Settings, clock: FakeClock) -> Iterator[TestClient]:
    with TestClient(create_app(settings, clock), raise_server_exceptions=False) as client:
        yield client
