"""api_change_notices: PostgreSQL tells every API process when what authorises a request changes

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25

Each API process on PostgreSQL keeps the key rows it has read in memory (ADR 0010) and
forgets them on a notice on the channel ``clubwire_api``, sent by these triggers in the
transaction of every change to what a request's authorisation reads: a key's hash, scopes,
revocation, expiry, club or prefix, a club's slug, module switch or programs version, and
any key or club added or deleted. A key's last use is not among them. On SQLite nothing is
kept in memory and nothing is needed.
"""

from __future__ import annotations

from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None

CHANNEL = "clubwire_api"
_WATCHED = {
    "api_keys": "secret_hash, scopes, revoked_at, expires_at, club_id, prefix",
    "clubs": "slug, webhooks_enabled, programs_version",
}


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    op.execute(
        f"""
        CREATE FUNCTION clubwire_api_changed() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN
            PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME);
            RETURN NULL;
        END
        $$
        """
    )
    for table, columns in _WATCHED.items():
        op.execute(
            f"""
            CREATE TRIGGER {table}_api_changed
            AFTER INSERT OR DELETE OR UPDATE OF {columns} ON {table}
            FOR EACH STATEMENT EXECUTE FUNCTION clubwire_api_changed()
            """
        )


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    for table in _WATCHED:
        op.execute(f"DROP TRIGGER {table}_api_changed ON {table}")
    op.execute("DROP FUNCTION clubwire_api_changed()")
