"""The queue's order indexed by due time, then delivery id: where a lane's claims go on from

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-26

A lane's claim reads its endpoint's due deliveries from the place its last claim reached,
(due time, id), rather than from the oldest, past every job the lane holds (ADR 0008). With
the id in the index, that place is one range of it, also among many deliveries of one due
time (one transaction publishing many events). PostgreSQL keeps the order in
``queue_entries``, SQLite in the deliveries' partial index ``ix_deliveries_pending``.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

PENDING = sa.text("next_attempt_at IS NOT NULL")
_ENTRIES = "ix_queue_entries_endpoint_id_due_at"
_ENTRIES_BY_ID = "ix_queue_entries_endpoint_id_due_at_delivery_id"


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(_ENTRIES_BY_ID, "queue_entries", ["endpoint_id", "due_at", "delivery_id"])
        op.drop_index(_ENTRIES, table_name="queue_entries")
    else:
        _pending(["endpoint_id", "next_attempt_at", "id"])


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.create_index(_ENTRIES, "queue_entries", ["endpoint_id", "due_at"])
        op.drop_index(_ENTRIES_BY_ID, table_name="queue_entries")
    else:
        _pending(["endpoint_id", "next_attempt_at"])


def _pending(columns: list[str]) -> None:
    """SQLite's queue order, on ``columns``."""
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_pending")
        batch_op.create_index("ix_deliveries_pending", columns, sqlite_where=PENDING)
