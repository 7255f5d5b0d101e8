"""api_key_use_and_expiry: where a key was last used from, and when it expires

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-25

The keys already there never expire and have no recorded address or User-Agent until their
next use. Both ways change ``api_keys`` in place (no table references it, but a rebuild on
SQLite would still copy every key for nothing); SQLite 3.35+ drops a column in place.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from clubwire.storage.types import UTCDateTime

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None, recreate="never") as batch_op:
        batch_op.add_column(sa.Column("expires_at", UTCDateTime(), nullable=True))
        batch_op.add_column(sa.Column("last_used_ip", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("last_used_user_agent", sa.String(length=200), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("api_keys", schema=None, recreate="never") as batch_op:
        batch_op.drop_column("last_used_user_agent")
        batch_op.drop_column("last_used_ip")
        batch_op.drop_column("expires_at")
