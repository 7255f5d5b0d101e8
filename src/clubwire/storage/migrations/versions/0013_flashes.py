"""flashes: one-time messages for a signed-in browser's next page, a secret in them sealed

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26

Every form of the settings area answers with a redirect (Post/Redirect/Get); what the action
did, and a secret to show once (a new API key, a signing secret), travels to the next page
in a row of ``flashes`` bound to the web session, read and deleted at once (ADR 0014). Rows
go with their session (ON DELETE CASCADE) and, when older than a few minutes, with retention.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from clubwire.storage.types import UTCDateTime

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "flashes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("kind", sa.String(length=40), nullable=False),
        sa.Column("subject", sa.String(length=64), nullable=False),
        sa.Column("words", sa.String(length=2500), nullable=False),
        sa.Column("secret_sealed", sa.String(length=500), nullable=True),
        sa.ForeignKeyConstraint(
            ["session_hash"],
            ["web_sessions.token_hash"],
            name=op.f("fk_flashes_session_hash_web_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_flashes")),
    )
    op.create_index("ix_flashes_session_hash", "flashes", ["session_hash"])
    op.create_index("ix_flashes_created_at", "flashes", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_flashes_created_at", table_name="flashes")
    op.drop_index("ix_flashes_session_hash", table_name="flashes")
    op.drop_table("flashes")
