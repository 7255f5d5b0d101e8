"""deliveries: index the pending ones by endpoint, not every one by due time

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-21

The worker claims each endpoint's due deliveries apart (ADR 0004), so a slow endpoint's
backlog is never scanned past; finished deliveries (``next_attempt_at`` NULL) stay out.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

PENDING = sa.text("next_attempt_at IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_due")
        batch_op.create_index(
            "ix_deliveries_pending",
            ["endpoint_id", "next_attempt_at"],
            unique=False,
            sqlite_where=PENDING,
            postgresql_where=PENDING,
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_pending")
        batch_op.create_index("ix_deliveries_due", ["next_attempt_at"], unique=False)
