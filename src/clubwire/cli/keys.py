"""``clubwire key …``."""

from __future__ import annotations

import click

from clubwire.cli.base import JSON_OPTION, cli, print_json, print_table, settings, text, transaction
from clubwire.domain import scopes, timestamps
from clubwire.services import clubs, keys


@cli.group()
def key() -> None:
    """API keys."""


@key.command("create")
@click.argument("slug")
@click.option(
    "--scope",
    "chosen",
    multiple=True,
    required=True,
    help=f"A scope to grant; repeat for more. One of: {', '.join(scopes.ALL)}.",
)
@click.option("--name", default="", help="A name to recognise the key by.")
@JSON_OPTION
def key_create(slug: str, chosen: tuple[str, ...], name: str, as_json: bool) -> None:
    """Create an API key; the full key is printed once and never stored."""
    with transaction(settings()) as session:
        record, value = keys.create_key(
            session, clubs.get_club(session, slug), chosen, name, timestamps.utc_now()
        )
        described = keys.describe(record)
    if as_json:
        print_json({"key": value, **described})
    else:
        click.echo(value)
        click.echo("This key is shown once: store it now.", err=True)


@key.command("list")
@click.argument("slug")
@JSON_OPTION
def key_list(slug: str, as_json: bool) -> None:
    """List the club's API keys (never their secrets)."""
    with transaction(settings()) as session:
        club_id = clubs.get_club(session, slug).id
        records = [keys.describe(k) for k in keys.list_keys(session, club_id)]
    if as_json:
        print_json(records)
        return
    rows = [
        [
            text(r["prefix"]),
            text(r["name"]),
            " ".join(r["scopes"]),  # type: ignore[arg-type]
            text(r["createdAt"]),
            text(r["lastUsedAt"], "never"),
            text(r["status"]),
        ]
        for r in records
    ]
    print_table(rows, ["PREFIX", "NAME", "SCOPES", "CREATED", "LAST USED", "STATUS"])


@key.command("revoke")
@click.argument("slug")
@click.argument("prefix")
@JSON_OPTION
def key_revoke(slug: str, prefix: str, as_json: bool) -> None:
    """Revoke a key at once and for good (revoking again changes nothing)."""
    with transaction(settings()) as session:
        club_id = clubs.get_club(session, slug).id
        described = keys.describe(keys.revoke_key(session, club_id, prefix, timestamps.utc_now()))
    if as_json:
        print_json(described)
    else:
        click.echo(f"Key {prefix} is revoked.")
