"""secret_key_check: a value sealed with the secret key, to check the key at start

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-21

Empty after the upgrade: the first process to start with this revision stores the row, once
its key is known to open the secrets already stored (services/secret_keys.py).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "secret_key_check",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("sealed", sa.String(length=500), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_secret_key_check_one_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_secret_key_check")),
    )


def downgrade() -> None:
    op.drop_table("secret_key_check")
