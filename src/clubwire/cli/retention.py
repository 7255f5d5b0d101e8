"""``clubwire prune``."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta

import click

from clubwire.cli.base import JSON_OPTION, cli, print_json, session_factory, settings
from clubwire.domain import timestamps
from clubwire.services import retention


@cli.command()
@JSON_OPTION
def prune(as_json: bool) -> None:
    """Delete delivery history and sent emails older than CLUBWIRE_RETENTION_DAYS, spent
    counts of failed sign-ins and stale flashes, and empty the payloads of clubs that keep
    them for fewer days, once (workers also do it every 10 minutes)."""
    current = settings()
    period = timedelta(days=current.retention_days)
    with session_factory(current) as sessions:
        pruned = retention.prune(sessions, timestamps.utc_now(), period)
    if as_json:
        counts = {_camel(name): count for name, count in asdict(pruned).items()}
        print_json({**counts, "retentionDays": current.retention_days})
        return
    click.echo(
        f"Deleted {pruned.attempts} attempts, {pruned.deliveries} deliveries, {pruned.events} "
        f"events and {pruned.emails} sent emails older than {current.retention_days} days, "
        f"{pruned.sign_in_failures} spent counts of failed sign-ins and {pruned.flashes} "
        f"stale flashes; emptied {pruned.payloads} expired payloads."
    )


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(word.title() for word in rest)
