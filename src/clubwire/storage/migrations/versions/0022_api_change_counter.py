"""api_change_counter: one number that moves with every change to what the kept rows hold

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28

Issue 38. Processes keep in memory what authorises an API request (a key, its club's
module switch and programs version; ADR 0010) and what a publish reads that rarely
changes (a club's endpoints and their subscriptions). ``api_changes.version`` moves, in the
transaction of the change, whenever any of it changes: a key's hash, scopes, revocation,
expiry, club or prefix; a club's slug, module switch or programs version; an endpoint's
club, subscribed kinds, switch or ordering; any of them added or deleted. What changes
often and authorises nothing (a key's last use, an endpoint's last answer) does not move it.

On SQLite a reader that sees ``PRAGMA data_version`` move (any commit, by any connection)
reads this number, and forgets what it keeps only when it moved too: the API's own writes
(rate counts every second, a key's last use) no longer cost every kept row. On PostgreSQL
the triggers of 0010 notify as before and now move the number too (0023 makes the number
their only work).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

WATCHED = {
    "api_keys": ("secret_hash", "scopes", "revoked_at", "expires_at", "club_id", "prefix"),
    "clubs": ("slug", "webhooks_enabled", "programs_version"),
    "endpoints": ("club_id", "events", "enabled", "ordered"),
}
_BUMP = "UPDATE api_changes SET version = version + 1"


def upgrade() -> None:
    op.create_table(
        "api_changes",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("version", sa.BigInteger(), nullable=False),
        sa.CheckConstraint("id = 1", name=op.f("ck_api_changes_one_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_changes")),
    )
    op.execute("INSERT INTO api_changes (id, version) VALUES (1, 0)")
    if op.get_bind().dialect.name == "postgresql":
        _upgrade_postgres()
        return
    for table, columns in WATCHED.items():
        for when in ("INSERT", "DELETE", f"UPDATE OF {', '.join(columns)}"):
            name = f"{table}_api_changed_{when.split()[0].lower()}"
            op.execute(f"CREATE TRIGGER {name} AFTER {when} ON {table} BEGIN {_BUMP}; END")


def _upgrade_postgres() -> None:
    """0010's function moves the number too, and endpoints get its trigger."""
    op.execute(
        f"""
        CREATE OR REPLACE FUNCTION clubwire_api_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('clubwire_api', TG_TABLE_NAME);
            {_BUMP};
            RETURN NULL;
        END
        $$
        """
    )
    op.execute(
        f"""
        CREATE TRIGGER endpoints_api_changed
        AFTER INSERT OR DELETE OR UPDATE OF {", ".join(WATCHED["endpoints"])} ON endpoints
        FOR EACH STATEMENT EXECUTE FUNCTION clubwire_api_changed()
        """
    )


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP TRIGGER endpoints_api_changed ON endpoints")
        op.execute(
            """
            CREATE OR REPLACE FUNCTION clubwire_api_changed() RETURNS trigger
            LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM pg_notify('clubwire_api', TG_TABLE_NAME);
                RETURN NULL;
            END
            $$
            """
        )
    else:
        for table in WATCHED:
            for when in ("insert", "delete", "update"):
                op.execute(f"DROP TRIGGER {table}_api_changed_{when}")
    op.drop_table("api_changes")
