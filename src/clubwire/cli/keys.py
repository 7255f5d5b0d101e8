"""``clubwire key …``."""

from __future__ import annotations

import click

from clubwire.cli.base import JSON_OPTION, cell, cli, print_json, print_table, settings, transaction
from clubwire.domain import scopes, timestamps
from clubwire.services import clubs
from clubwire.services.club_api import keys


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
@click.option(
    "--expires-in",
    type=click.Choice(list(keys.EXPIRIES)),
    default=keys.NEVER,
    show_default=True,
    help="When the key stops working: after 30, 90 or 365 days, or never.",
)
@JSON_OPTION
def key_create(
    slug: str, chosen: tuple[str, ...], name: str, expires_in: str, as_json: bool
) -> None:
    """Create an API key; the full key is printed once and never stored."""
    now = timestamps.utc_now()
    with transaction(settings()) as session:
        club = clubs.get_club(session, slug)
        record, value = keys.create_key(session, club, chosen, name, now, expires_in)
        described = keys.describe(record, now)
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
        now = timestamps.utc_now()
        records = [keys.describe(k, now) for k in keys.list_keys(session, club_id)]
    if as_json:
        print_json(records)
        return
    rows = [
        [
            cell(r["prefix"]),
            cell(r["name"]),
            " ".join(r["scopes"]),  # type: ignore[arg-type]
            cell(r["createdAt"]),
            cell(r["expiresAt"], "never"),
            cell(r["status"]),
            cell(r["lastUsedAt"], "never"),
            cell(r["lastUsedIp"]),
            cell(r["lastUsedUserAgent"]),
        ]
        for r in records
    ]
    print_table(
        rows,
        [
            "PREFIX",
            "NAME",
            "SCOPES",
            "CREATED",
            "EXPIRES",
            "STATUS",
            "LAST USED",
            "FROM",
            "USER AGENT",
        ],
    )


@key.command("revoke")
@click.argument("slug")
@click.argument("prefix")
@JSON_OPTION
def key_revoke(slug: str, prefix: str, as_json: bool) -> None:
    """Revoke a key at once and for good (revoking again changes nothing)."""
    with transaction(settings()) as session:
        club_id = clubs.get_club(session, slug).id
        now = timestamps.utc_now()
        described = keys.describe(keys.revoke_key(session, club_id, prefix, now), now)
    if as_json:
        print_json(described)
    else:
        click.echo(f"Key {prefix} is revoked.")
