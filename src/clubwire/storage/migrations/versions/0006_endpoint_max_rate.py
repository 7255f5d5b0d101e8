"""endpoint_max_rate: at most how many deliveries a second an endpoint is sent

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-25

NULL, no limit, for every endpoint already there; staff set it per endpoint (1 to 1000,
``domain/max_rates.py``), and the delivery engine holds its workers to it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("endpoints", schema=None) as batch_op:
        batch_op.add_column(sa.Column("max_rate", sa.Integer(), nullable=True))


def downgrade() -> None:
    # Never by rebuilding the table on SQLite: with foreign keys on, dropping the old
    # ``endpoints`` would delete every delivery with it. SQLite 3.35+ drops a column in place.
    with op.batch_alter_table("endpoints", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("max_rate")
