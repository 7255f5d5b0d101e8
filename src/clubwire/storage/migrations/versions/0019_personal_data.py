"""personal data: who each event is about, erasures, payload retention, skipped reasons

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28

Issue 34. ``event_people`` keeps, at publish, a digest of each member id and email an event
carries (never the values), so a member's events are found without reading the club's
history (ADR 0016); ``erasures`` records each erasure without personal data. An event says
why part of its body was removed (``payload_removed``: ``erased`` or ``expired``), and the
events whose payload may yet expire are indexed by club and time. A club may keep payloads
for fewer days than the history (``payload_days``), and a skipped delivery says why it was
skipped (``skipped_reason``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from clubwire.storage.types import UTCDateTime

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

_KEPT = sa.text("payload_removed IS NULL")
_ADDED = (
    ("clubs", "payload_days"),
    ("events", "payload_removed"),
    ("deliveries", "skipped_reason"),
)


def upgrade() -> None:
    op.add_column("clubs", sa.Column("payload_days", sa.Integer(), nullable=True))
    op.add_column("events", sa.Column("payload_removed", sa.String(length=16), nullable=True))
    op.add_column("deliveries", sa.Column("skipped_reason", sa.String(length=16), nullable=True))
    op.create_index(
        "ix_events_club_id_created_at_kept",
        "events",
        ["club_id", "created_at"],
        sqlite_where=_KEPT,
        postgresql_where=_KEPT,
    )
    op.create_table(
        "event_people",
        sa.Column("event_id", sa.String(length=32), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("club_id", sa.String(length=32), nullable=False),
        sa.ForeignKeyConstraint(
            ["event_id"],
            ["events.id"],
            name=op.f("fk_event_people_event_id_events"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("event_id", "digest", name=op.f("pk_event_people")),
    )
    op.create_index(
        "ix_event_people_club_id_digest", "event_people", ["club_id", "digest"], unique=False
    )
    op.create_table(
        "erasures",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("club_id", sa.String(length=32), nullable=False),
        sa.Column("requested_by", sa.String(length=16), nullable=False),
        sa.Column("matched_by", sa.String(length=32), nullable=False),
        sa.Column("started_at", UTCDateTime(), nullable=False),
        sa.Column("finished_at", UTCDateTime(), nullable=False),
        sa.Column("counts", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(
            ["club_id"],
            ["clubs.id"],
            name=op.f("fk_erasures_club_id_clubs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_erasures")),
    )
    op.create_index(
        "ix_erasures_club_id_started_at", "erasures", ["club_id", "started_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_erasures_club_id_started_at", table_name="erasures")
    op.drop_table("erasures")
    op.drop_index("ix_event_people_club_id_digest", table_name="event_people")
    op.drop_table("event_people")
    op.drop_index("ix_events_club_id_created_at_kept", table_name="events")
    # In place, never by rebuilding a table (see 0018).
    for table, column in _ADDED:
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.drop_column(column)
