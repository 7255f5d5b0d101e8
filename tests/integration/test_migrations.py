"""The migrations build exactly the schema the models describe, on each database."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, inspect

from clubwire import errors
from clubwire.storage import database, migrate
from clubwire.storage.models import Base
from tests.conftest import make_settings


def test_database_is_at_head(engine: Engine) -> None:
    assert migrate.current(engine) == migrate.head()


def test_models_and_migrations_agree(engine: Engine) -> None:
    with engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
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
