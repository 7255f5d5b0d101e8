"""Upgrade a database to the newest schema, and tell whether it is there."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

from clubwire import errors

MIGRATIONS = Path(__file__).with_name("migrations")


def _config() -> Config:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade(engine: Engine) -> None:
    """Bring the schema to the newest revision (a no-op when it is there)."""
    config = _config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")


def head() -> str | None:
    return ScriptDirectory.from_config(_config()).get_current_head()


def current(engine: Engine) -> str | None:
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def require_head(engine: Engine) -> None:
    """Refuse to run against a schema that is not the newest one."""
    at, newest = current(engine), head()
    if at != newest:
        raise errors.NotMigrated(
            f"The database schema is at revision {at or 'none'}, the newest is {newest}: "
            "run `clubwire migrate`."
        )
