"""ordered delivery: ordering keys and sequences, ordered endpoints and their lines

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28

Issue 35. Each event names its resource (``ordering_key``) and its place among that
resource's events of the club (``sequence``, from ``ordering_counters``). An endpoint may be
``ordered``: its deliveries of a key then go one at a time (``deliveries.ordering_key`` set
while a delivery goes in order), and those with an attempt to come wait in
``ordered_lines`` (ADR 0017). A delivery sent after an earlier one of its key died says
which (``missed_sequence``). Events published before this revision have no key.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None

KEY = sa.String(length=160)
_ADDED = (
    ("endpoints", "ordered"),
    ("events", "ordering_key"),
    ("events", "sequence"),
    ("deliveries", "ordering_key"),
    ("deliveries", "missed_sequence"),
)


def upgrade() -> None:
    op.add_column(
        "endpoints", sa.Column("ordered", sa.Boolean(), server_default=sa.false(), nullable=False)
    )
    op.add_column("events", sa.Column("ordering_key", KEY, nullable=True))
    op.add_column("events", sa.Column("sequence", sa.BigInteger(), nullable=True))
    op.add_column("deliveries", sa.Column("ordering_key", KEY, nullable=True))
    op.add_column("deliveries", sa.Column("missed_sequence", sa.BigInteger(), nullable=True))
    op.create_table(
        "ordered_lines",
        sa.Column("delivery_id", sa.String(length=32), nullable=False),
        sa.Column("endpoint_id", sa.String(length=32), nullable=False),
        sa.Column("ordering_key", KEY, nullable=False),
        sa.Column("sequence", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["delivery_id"],
            ["deliveries.id"],
            name=op.f("fk_ordered_lines_delivery_id_deliveries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("delivery_id", name=op.f("pk_ordered_lines")),
    )
    op.create_index(
        "ix_ordered_lines_endpoint_id_ordering_key_sequence",
        "ordered_lines",
        ["endpoint_id", "ordering_key", "sequence"],
        unique=False,
    )
    op.create_table(
        "ordering_counters",
        sa.Column("club_id", sa.String(length=32), nullable=False),
        sa.Column("ordering_key", KEY, nullable=False),
        sa.Column("last", sa.BigInteger(), nullable=False),
        sa.ForeignKeyConstraint(
            ["club_id"],
            ["clubs.id"],
            name=op.f("fk_ordering_counters_club_id_clubs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("club_id", "ordering_key", name=op.f("pk_ordering_counters")),
    )


def downgrade() -> None:
    op.drop_table("ordering_counters")
    op.drop_index("ix_ordered_lines_endpoint_id_ordering_key_sequence", table_name="ordered_lines")
    op.drop_table("ordered_lines")
    # In place, never by rebuilding a table (see 0018).
    for table, column in _ADDED:
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.drop_column(column)
