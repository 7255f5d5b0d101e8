"""receivers steer: Retry-After kept, an endpoint's reason as a code, headers of its own

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28

Issue 33. An attempt keeps the receiver's ``Retry-After`` as given (cleaned and cut, like
every text a receiver sends); a delivery says whether its next attempt is when the receiver
asked (``next_attempt_asked``) rather than the schedule's step. An endpoint's
``disabled_reason`` becomes a code (``dead_in_a_row``, ``gone``, ``staff``, ``superadmin``)
that the settings area, the email and ``--json`` word each their own way, and an endpoint may
carry headers of its own, sealed at rest like its secret (``headers_sealed``).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

# The words stored before, and the code each becomes.
_REASONS = (
    ("Switched off after 5 dead deliveries in a row", "dead_in_a_row"),
    ("Switched off by a user", "staff"),
)
_ADDED = (
    ("endpoints", "headers_sealed"),
    ("deliveries", "next_attempt_asked"),
    ("attempts", "retry_after"),
)


def upgrade() -> None:
    op.add_column("attempts", sa.Column("retry_after", sa.String(length=100), nullable=True))
    op.add_column(
        "deliveries",
        sa.Column("next_attempt_asked", sa.Boolean(), server_default=sa.false(), nullable=False),
    )
    op.add_column("endpoints", sa.Column("headers_sealed", sa.Text(), nullable=True))
    endpoints = sa.table("endpoints", sa.column("disabled_reason", sa.String()))
    for words, code in _REASONS:
        op.execute(
            endpoints.update()
            .where(endpoints.c.disabled_reason == words)
            .values(disabled_reason=code)
        )
    op.execute(
        endpoints.update()
        .where(
            endpoints.c.disabled_reason.is_not(None),
            endpoints.c.disabled_reason.not_in([code for _, code in _REASONS]),
        )
        .values(disabled_reason="staff")
    )


def downgrade() -> None:
    endpoints = sa.table("endpoints", sa.column("disabled_reason", sa.String()))
    for words, code in _REASONS:
        op.execute(
            endpoints.update()
            .where(endpoints.c.disabled_reason == code)
            .values(disabled_reason=words)
        )
    # Never by rebuilding a table on SQLite: with foreign keys on, dropping the old
    # ``endpoints`` would delete every delivery with it. SQLite 3.35+ drops a column in place.
    for table, column in _ADDED:
        with op.batch_alter_table(table, recreate="never") as batch:
            batch.drop_column(column)
