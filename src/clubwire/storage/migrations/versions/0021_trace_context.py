"""trace context: each event keeps the W3C trace context it was published in

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28

Issue 36. With tracing on (``clubwire.tracing``, ADR 0018), an event keeps the
``traceparent`` of the span that published it, and the ``tracestate`` beside it, so every
attempt of every delivery of it, in any worker and at any later time, is a span of the same
trace. NULL where tracing was off when it was published.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("events", sa.Column("traceparent", sa.String(length=64), nullable=True))
    op.add_column("events", sa.Column("tracestate", sa.String(length=512), nullable=True))


def downgrade() -> None:
    # In place, never by rebuilding a table (see 0018).
    with op.batch_alter_table("events", recreate="never") as batch:
        batch.drop_column("tracestate")
        batch.drop_column("traceparent")
