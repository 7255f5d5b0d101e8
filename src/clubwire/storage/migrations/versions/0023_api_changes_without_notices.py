"""api_changes_without_notices: the triggers of 0010 move the change counter only

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28

Issue 38 item 4. A transaction that has queued a ``NOTIFY`` takes, as it commits, a lock for
the whole PostgreSQL instance; 0010's triggers queued one in every transaction that changed a
key, a club's switch or an endpoint. They now only move ``api_changes.version`` (0022): the
services that make those changes tell every process after their commit, on a connection of
their own (``storage.notices``), and each API process reads the number every second, which
bounds how long a change no notice told of (an operator's ``psql``, a process that died
between its commit and its notice) stays unseen. Nothing changes on SQLite.
"""

from __future__ import annotations

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def _function(body: str) -> str:
    return f"""
        CREATE OR REPLACE FUNCTION clubwire_api_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            {body}
            RETURN NULL;
        END
        $$
        """


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(_function("UPDATE api_changes SET version = version + 1;"))


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(
            _function(
                "PERFORM pg_notify('clubwire_api', TG_TABLE_NAME); "
                "UPDATE api_changes SET version = version + 1;"
            )
        )
