"""email_outbox: emails to club admins about failing endpoints; each admin's choice

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25

Emails are written to ``email_outbox`` in the transaction of the change they tell of and
sent by a worker (services.mail.outbox). ``club_admins.failure_emails`` is each admin's choice to
get them, on by default.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from clubwire.storage.types import UTCDateTime

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

_DUE = sa.text("next_attempt_at IS NOT NULL")


def upgrade() -> None:
    op.create_table(
        "email_outbox",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("club_id", sa.String(length=32), nullable=False),
        sa.Column("recipient", sa.String(length=254), nullable=False),
        sa.Column("subject", sa.String(length=200), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", UTCDateTime(), nullable=True),
        sa.Column("lease_token", sa.String(length=32), nullable=True),
        sa.Column("sent_at", UTCDateTime(), nullable=True),
        sa.Column("last_error", sa.String(length=200), nullable=True),
        sa.ForeignKeyConstraint(
            ["club_id"],
            ["clubs.id"],
            name=op.f("fk_email_outbox_club_id_clubs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_email_outbox")),
    )
    op.create_index(
        "ix_email_outbox_due",
        "email_outbox",
        ["next_attempt_at"],
        sqlite_where=_DUE,
        postgresql_where=_DUE,
    )
    op.create_index("ix_email_outbox_club_id_created_at", "email_outbox", ["club_id", "created_at"])
    op.add_column(
        "club_admins",
        sa.Column("failure_emails", sa.Boolean(), server_default=sa.true(), nullable=False),
    )


def downgrade() -> None:
    with op.batch_alter_table("club_admins") as batch_op:
        batch_op.drop_column("failure_emails")
    op.drop_index("ix_email_outbox_club_id_created_at", table_name="email_outbox")
    op.drop_index("ix_email_outbox_due", table_name="email_outbox")
    op.drop_table("email_outbox")
