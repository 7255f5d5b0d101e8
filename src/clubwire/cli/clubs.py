"""``clubwire club …`` and ``clubwire program import``."""

from __future__ import annotations

import click
import orjson

from clubwire import errors
from clubwire.cli.base import (
    INPUT_FILE,
    JSON_OPTION,
    cli,
    one_line,
    print_json,
    print_table,
    read_input,
    record_of,
    settings,
    transaction,
)
from clubwire.domain import program_wire, timestamps
from clubwire.services import clubs, programs


@cli.group()
def club() -> None:
    """Clubs and their Webhooks & API module."""


@club.command("create")
@click.argument("slug")
@click.option("--name", required=True, help="The club's display name.")
@JSON_OPTION
def club_create(slug: str, name: str, as_json: bool) -> None:
    """Create a club (its module starts off)."""
    current = settings()
    with transaction(current) as session:
        created = clubs.create_club(session, slug, name, timestamps.utc_now())
        record = clubs.describe(created, current.club_base_url(slug))
    if as_json:
        print_json(record)
    else:
        click.echo(f"Created club {slug} ({record['id']}); Webhooks & API is off.")


@club.command("module")
@click.argument("slug")
@click.argument("state", type=click.Choice(["on", "off"]))
@JSON_OPTION
def club_module(slug: str, state: str, as_json: bool) -> None:
    """Switch the club's Webhooks & API module on or off."""
    current = settings()
    with transaction(current) as session:
        changed = clubs.set_webhooks_module(session, slug, state == "on", timestamps.utc_now())
        record = clubs.describe(changed, current.club_base_url(slug))
    if as_json:
        print_json(record)
    else:
        click.echo(f"Webhooks & API is {state} for {slug}.")


@club.command("payloads")
@click.argument("slug")
@click.option("--days", type=int, help="Keep event payloads this many days (1 to the history's).")
@click.option("--history", is_flag=True, help="Keep them as long as the history.")
@JSON_OPTION
def club_payloads(slug: str, days: int | None, history: bool, as_json: bool) -> None:
    """Keep the club's event payloads for fewer days than the history (CLUBWIRE_RETENTION_DAYS):
    older ones are emptied once their deliveries are done."""
    if (days is not None) == history:
        raise click.UsageError("Give either --days N or --history.")
    current = settings()
    with transaction(current) as session:
        changed = clubs.set_payload_days(
            session, slug, days, current.retention_days, timestamps.utc_now()
        )
        record = clubs.describe(changed, current.club_base_url(slug))
    if as_json:
        print_json(record)
    else:
        kept = clubs.payloads_kept(days, current.retention_days)
        click.echo(f"Payloads of {slug} are kept {kept}.")


@club.command("list")
@JSON_OPTION
def club_list(as_json: bool) -> None:
    """List every club."""
    current = settings()
    with transaction(current) as session:
        listed = clubs.list_clubs(session)
        records = [clubs.describe(c, current.club_base_url(c.slug)) for c in listed]
    if as_json:
        print_json(records)
        return
    rows = [
        [
            c.slug,
            _name(c.name),
            _on_off(c.webhooks_enabled),
            clubs.payloads_kept(c.payload_days, current.retention_days),
            current.club_base_url(c.slug),
        ]
        for c in listed
    ]
    print_table(rows, ["SLUG", "NAME", "MODULE", "PAYLOADS KEPT", "BASE URL"])


def _name(name: object) -> str:
    """A club's name on one line: one stored before names were refused control characters
    (issue 31) is shown with them escaped, never written to the terminal as they are."""
    return one_line(str(name), clubs.MAX_NAME_LENGTH * 4)


def _on_off(enabled: object) -> str:
    return "on" if enabled else "off"


@cli.group()
def program() -> None:
    """Programs synced from the platform."""


@program.command("import")
@click.argument("slug")
@click.argument("file", type=INPUT_FILE)
@JSON_OPTION
def program_import(slug: str, file: str, as_json: bool) -> None:
    """Upsert the programs of FILE (a JSON array; '-' reads stdin) into the club."""
    records = _read_programs(*read_input(file))
    with transaction(settings()) as session:
        counts = programs.import_programs(
            session, clubs.get_club(session, slug), records, timestamps.utc_now()
        )
    summary = {upserted.value: counts[upserted] for upserted in programs.Upserted}
    if as_json:
        print_json(summary)
    else:
        click.echo(
            f"Imported {len(records)} programs into {slug}: "
            + ", ".join(f"{n} {upserted}" for upserted, n in summary.items())
            + "."
        )


def _read_programs(raw: bytes, name: str) -> list[program_wire.ProgramRecord]:
    items = read_json(raw, name)
    if not isinstance(items, list):
        raise errors.InvalidInput(f"{name} must hold a JSON array of programs.")
    records = [
        record_of(program_wire.ProgramRecord, item, f"{name}: program {index + 1}")
        for index, item in enumerate(items)
    ]
    seen: set[str] = set()
    for record in records:
        if record.id in seen:
            raise errors.InvalidInput(f"{name}: the id {record.id!r} appears twice.")
        seen.add(record.id)
    return records


def read_json(raw: bytes, name: str) -> object:
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise errors.InvalidInput(f"{name} is not JSON: {exc}") from None
