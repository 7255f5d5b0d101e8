"""Alembic environment: runs on the connection ``clubwire.storage.migrate`` hands it."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from clubwire.storage.models import Base


def run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run(context.config.attributes["connection"])
