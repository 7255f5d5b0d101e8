"""deliveries: order each endpoint's deliveries by (created_at, id) in its index

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25

The deliveries page (issue 15, item 6) is keyset-paginated on (created_at, id). With only
(endpoint_id, created_at) indexed, SQLite with statistics (ANALYZE) plans a page of an
endpoint holding most of a database's deliveries as a scan and a sort of them all; with id in
the index both databases read a page straight off it. It replaces the narrower index, whose
other readers (replay windows) use its (endpoint_id, created_at) prefix as before.
"""

from __future__ import annotations

from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_endpoint_id_created_at")
        batch_op.create_index(
            "ix_deliveries_endpoint_id_created_at_id",
            ["endpoint_id", "created_at", "id"],
            unique=False,
        )


def downgrade() -> None:
    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index("ix_deliveries_endpoint_id_created_at_id")
        batch_op.create_index(
            "ix_deliveries_endpoint_id_created_at", ["endpoint_id", "created_at"], unique=False
        )
