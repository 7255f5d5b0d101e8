"""queue_entries: on PostgreSQL, the queue's order in a table of its own, so that recording
an attempt updates its delivery in place

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26

An update that changes a column of any index (``next_attempt_at``, in the partial index
``ix_deliveries_pending``) is never HOT on PostgreSQL: every recorded attempt wrote a new
entry into each of the deliveries' five indexes. ``queue_entries`` holds the same order (one
row per delivery with an attempt due), kept from ``deliveries.next_attempt_at`` by two
statement-level triggers in the statement that changes it, and the deliveries get room on
their pages for the new versions (``fillfactor``). A recorded result then costs PostgreSQL
about a third less (ADR 0008). SQLite keeps the partial index: it rewrites only the indexes
whose columns change, and a second table cost it more than it saved.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from clubwire.storage.types import UTCDateTime

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None

FILLFACTOR = 70  # per cent of a deliveries page filled by inserts; the rest for updates
PENDING = sa.text("next_attempt_at IS NOT NULL")
_TRIGGERS = {"INSERT": "clubwire_queue_entries_added", "UPDATE": "clubwire_queue_entries_moved"}


def _enter(source: str) -> str:
    """The deliveries of ``source`` that have an attempt due, as entries."""
    return f"""INSERT INTO queue_entries (delivery_id, endpoint_id, due_at)
            SELECT id, endpoint_id, next_attempt_at FROM {source}
            WHERE next_attempt_at IS NOT NULL"""  # noqa: S608 (constants of ours, not input)


# In the triggers, ``changed``: the rows the statement inserted or updated.
_ENTER = _enter("changed")


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.create_table(
        "queue_entries",
        sa.Column("delivery_id", sa.String(length=32), nullable=False),
        sa.Column("endpoint_id", sa.String(length=32), nullable=False),
        sa.Column("due_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["deliveries.id"],
            name=op.f("fk_queue_entries_delivery_id_deliveries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("delivery_id", name=op.f("pk_queue_entries")),
    )
    op.execute(_enter("deliveries"))
    op.create_index(
        "ix_queue_entries_endpoint_id_due_at", "queue_entries", ["endpoint_id", "due_at"]
    )
    # New deliveries with an attempt due enter the queue; updated ones leave it when they
    # finish, or enter it or move to their new due time.
    op.execute(
        f"""
        CREATE FUNCTION clubwire_queue_entries_added() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            {_ENTER};
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION clubwire_queue_entries_moved() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            DELETE FROM queue_entries AS q USING changed AS c
            WHERE q.delivery_id = c.id AND c.next_attempt_at IS NULL;
            {_ENTER}
            ON CONFLICT (delivery_id) DO UPDATE SET due_at = EXCLUDED.due_at
            WHERE queue_entries.due_at IS DISTINCT FROM EXCLUDED.due_at;
            RETURN NULL;
        END
        $$
        """  # noqa: S608 (constants of ours, not input)
    )
    for event, function in _TRIGGERS.items():
        op.execute(
            f"""
            CREATE TRIGGER deliveries_{event.lower()}_queue_entries
            AFTER {event} ON deliveries REFERENCING NEW TABLE AS changed
            FOR EACH STATEMENT EXECUTE FUNCTION {function}()
            """
        )
    op.drop_index("ix_deliveries_pending", table_name="deliveries")
    op.execute(f"ALTER TABLE deliveries SET (fillfactor = {FILLFACTOR})")


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute("ALTER TABLE deliveries RESET (fillfactor)")
    op.create_index(
        "ix_deliveries_pending",
        "deliveries",
        ["endpoint_id", "next_attempt_at"],
        postgresql_where=PENDING,
    )
    for event, function in _TRIGGERS.items():
        op.execute(f"DROP TRIGGER deliveries_{event.lower()}_queue_entries ON deliveries")
        op.execute(f"DROP FUNCTION {function}()")
    op.drop_index("ix_queue_entries_endpoint_id_due_at", table_name="queue_entries")
    op.drop_table("queue_entries")
