"""queue_heads: each endpoint's next due time and lane lease, so finding due work reads
only the endpoints with due work (ADR 0008)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-25

Filled for the endpoints that have unfinished deliveries; the rest get their head when a
delivery first comes due. Leases move from deliveries to the heads.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from clubwire.storage.types import UTCDateTime

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

DUE = sa.text("next_due_at IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "queue_heads",
        sa.Column("endpoint_id", sa.String(length=32), nullable=False),
        sa.Column("next_due_at", UTCDateTime(), nullable=True),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("lease_token", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["endpoints.id"],
            name=op.f("fk_queue_heads_endpoint_id_endpoints"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("endpoint_id", name=op.f("pk_queue_heads")),
    )
    op.create_index(
        "ix_queue_heads_next_due_at",
        "queue_heads",
        ["next_due_at"],
        unique=False,
        sqlite_where=DUE,
        postgresql_where=DUE,
    )
    op.execute(
        "INSERT INTO queue_heads (endpoint_id, next_due_at) "
        "SELECT endpoint_id, min(next_attempt_at) FROM deliveries "
        "WHERE next_attempt_at IS NOT NULL GROUP BY endpoint_id"
    )
    with op.batch_alter_table("deliveries", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("lease_until")


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("lease_until", UTCDateTime(), nullable=True))
    op.drop_index("ix_queue_heads_next_due_at", table_name="queue_heads")
    op.drop_table("queue_heads")
