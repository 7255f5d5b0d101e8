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
    """Delete delivery history older than CLUBWIRE_RETENTION_DAYS once (workers also do it
    every 10 minutes)."""
    current = settings()
    period = timedelta(days=current.retention_days)
    with session_factory(current) as sessions:
        pruned = retention.prune(sessions, timestamps.utc_now(), period)
    if as_json:
        print_json({**asdict(pruned), "retentionDays": current.retention_days})
        return
    click.echo(
        f"Deleted {pruned.attempts} attempts, {pruned.deliveries} deliveries and "
        f"{pruned.events} events older than {current.retention_days} days."
    )
