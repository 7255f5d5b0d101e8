"""Alembic environment: runs on the connection ``clubwire.storage.migrate`` hands it."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from clubwire.storage.models import Base, on_database


def run(connection: Connection) -> None:
    dialect_name = connection.dialect.name
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=dialect_name == "sqlite",
        compare_type=True,
        include_object=lambda item, *_: on_database(item, dialect_name),
    )
    with context.begin_transaction():
        context.run_migrations()


run(context.config.attributes["connection"])
