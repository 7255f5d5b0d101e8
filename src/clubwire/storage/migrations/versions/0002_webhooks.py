"""webhook endpoints, events, deliveries and attempts

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from clubwire.storage.types import UTCDateTime

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "endpoints",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("club_id", sa.String(length=32), nullable=False),
        sa.Column("url", sa.String(length=2048), nullable=False),
        sa.Column("events", sa.String(length=500), nullable=False),
        sa.Column("secret_sealed", sa.String(length=500), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("disabled_reason", sa.String(length=200), nullable=True),
        sa.Column("disabled_at", UTCDateTime(), nullable=True),
        sa.Column("last_delivery_at", UTCDateTime(), nullable=True),
        sa.Column("last_response_code", sa.Integer(), nullable=True),
        sa.Column("dead_in_a_row", sa.Integer(), server_default="0", nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["club_id"], ["clubs.id"], name=op.f("fk_endpoints_club_id_clubs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_endpoints")),
    )
    with op.batch_alter_table("endpoints", schema=None) as batch_op:
        batch_op.create_index(
            "ix_endpoints_club_id_created_at", ["club_id", "created_at"], unique=False
        )

    op.create_table(
        "events",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("club_id", sa.String(length=32), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("idempotency_key", sa.String(length=255), nullable=True),
        sa.ForeignKeyConstraint(
            ["club_id"], ["clubs.id"], name=op.f("fk_events_club_id_clubs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
        sa.UniqueConstraint("club_id", "idempotency_key", name=op.f("uq_events_club_id")),
    )
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.create_index("ix_events_created_at", ["created_at"], unique=False)

    op.create_table(
        "deliveries",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("club_id", sa.String(length=32), nullable=False),
        sa.Column("event_id", sa.String(length=32), nullable=False),
        sa.Column("endpoint_id", sa.String(length=32), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.Column("next_attempt_at", UTCDateTime(), nullable=True),
        sa.Column("next_trigger", sa.String(length=16), server_default="scheduled", nullable=False),
        sa.Column("lease_until", UTCDateTime(), nullable=True),
        sa.Column("response_code", sa.Integer(), nullable=True),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.Column("updated_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(
            ["club_id"], ["clubs.id"], name=op.f("fk_deliveries_club_id_clubs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["endpoint_id"],
            ["endpoints.id"],
            name=op.f("fk_deliveries_endpoint_id_endpoints"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["events.id"],
            name=op.f("fk_deliveries_event_id_events"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
    )
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.create_index(
            "ix_deliveries_club_id_created_at", ["club_id", "created_at"], unique=False
        )
        batch_op.create_index("ix_deliveries_due", ["next_attempt_at"], unique=False)
        batch_op.create_index(
            "ix_deliveries_endpoint_id_created_at", ["endpoint_id", "created_at"], unique=False
        )
        batch_op.create_index("ix_deliveries_event_id", ["event_id"], unique=False)

    op.create_table(
        "attempts",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("delivery_id", sa.String(length=32), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("trigger", sa.String(length=16), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("duration_ms", sa.Integer(), nullable=False),
        sa.Column("response_code", sa.Integer(), nullable=True),
        sa.Column("error", sa.String(length=200), nullable=True),
        sa.Column("excerpt", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["deliveries.id"],
            name=op.f("fk_attempts_delivery_id_deliveries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_attempts")),
    )
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.create_index(
            "ix_attempts_delivery_id_number", ["delivery_id", "number"], unique=False
        )
        batch_op.create_index("ix_attempts_started_at", ["started_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("attempts", schema=None) as batch_op:
        batch_op.drop_index("ix_attempts_started_at")
        batch_op.drop_index("ix_attempts_delivery_id_number")

    op.drop_table("attempts")
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_event_id")
        batch_op.drop_index("ix_deliveries_endpoint_id_created_at")
        batch_op.drop_index("ix_deliveries_due")
        batch_op.drop_index("ix_deliveries_club_id_created_at")

    op.drop_table("deliveries")
    with op.batch_alter_table("events", schema=None) as batch_op:
        batch_op.drop_index("ix_events_created_at")

    op.drop_table("events")
    with op.batch_alter_table("endpoints", schema=None) as batch_op:
        batch_op.drop_index("ix_endpoints_club_id_created_at")

    op.drop_table("endpoints")
