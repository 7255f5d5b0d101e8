"""``clubwire member erase``."""

from __future__ import annotations

import click

from clubwire.cli.base import JSON_OPTION, cli, print_json, session_factory, settings
from clubwire.domain import personal_data, timestamps
from clubwire.services.personal_data import erasures


@cli.group()
def member() -> None:
    """A club's members, as its events carry them."""


@member.command("erase")
@click.argument("slug")
@click.option("--email", help="Erase every person of the club's events with this email.")
@click.option("--member-id", help="Erase every person with this member id.")
@click.option("--dry-run", is_flag=True, help="Count what would change; change nothing.")
@JSON_OPTION
def member_erase(
    slug: str, email: str | None, member_id: str | None, dry_run: bool, as_json: bool
) -> None:
    """Erase a member's name and email from everything the club's events left behind."""
    asked = personal_data.erasure_request(email, member_id, dry_run)
    with session_factory(settings()) as sessions:
        done = erasures.erase(
            sessions,
            slug,
            asked.wanted,
            timestamps.utc_now,
            erasures.By.OPERATOR,
            dry_run=dry_run,
        )
    if as_json:
        print_json(done.describe())
        return
    counts = done.counts
    said = "Would erase" if dry_run else f"Erased ({done.id})"
    click.echo(
        f"{said}: {counts.events} events, {counts.deliveries} deliveries not yet delivered, "
        f"{counts.attempts} recorded answers, {counts.emails} emails and {counts.flashes} "
        f"messages in {slug}."
    )
