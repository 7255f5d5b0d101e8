"""rate_counts: the club data API's requests per minute, counted by every API process together

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-25

A new table (ADR 0009); nothing to fill: counting starts with the next request.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "rate_counts",
        sa.Column("bucket", sa.String(length=80), nullable=False),
        sa.Column("window_number", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("count", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("bucket", "window_number", name=op.f("pk_rate_counts")),
    )


def downgrade() -> None:
    op.drop_table("rate_counts")
