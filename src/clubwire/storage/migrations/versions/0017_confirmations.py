"""confirmations: each confirmation page of the settings area acts once

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-28

A page that asks to confirm an action (Replay's preview) carries a new token; the action
writes it here in its own transaction, and a second submission of the same page (a double
click, a resubmitted form) finds it and does nothing. Rows go with their web session (ON
DELETE CASCADE): at sign-out, or when the expired session is deleted.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from clubwire.storage.types import UTCDateTime

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "confirmations",
        sa.Column("session_hash", sa.String(length=64), nullable=False),
        sa.Column("token", sa.String(length=32), nullable=False),
        sa.Column("acted_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["session_hash"],
            ["web_sessions.token_hash"],
            name=op.f("fk_confirmations_session_hash_web_sessions"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("session_hash", "token", name=op.f("pk_confirmations")),
    )


def downgrade() -> None:
    op.drop_table("confirmations")
