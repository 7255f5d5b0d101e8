"""The migrations build exactly the schema the models describe, on each database."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from clubwire.storage import migrate
from clubwire.storage.models import Base


def test_database_is_at_head(engine: Engine) -> None:
    assert migrate.current(engine) == migrate.head()


def test_models_and_migrations_agree(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_upgrade_is_idempotent(engine: Engine) -> None:
    migrate.upgrade(engine)
    assert set(inspect(engine).get_table_names()) >= {"clubs", "programs", "api_keys"}
