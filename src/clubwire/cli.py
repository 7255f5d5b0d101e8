"""The ``clubwire`` command. Bad input: a non-zero exit and one readable line on stderr."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, BinaryIO

import click
import orjson
import pydantic
import sqlalchemy.exc
from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.domain import programs, scopes, timestamps
from clubwire.services import clubs, keys
from clubwire.services import programs as program_service
from clubwire.settings import Settings, load_settings
from clubwire.storage import database, migrate

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="clubwire")
def cli() -> None:
    """clubwire: a club's data API and signed webhooks."""


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line; every failure ends in one line on stderr and a non-zero exit."""
    try:
        cli.main(args=argv, prog_name="clubwire", standalone_mode=False)
    except click.UsageError as exc:
        hint = f" (see: {exc.ctx.command_path} --help)" if exc.ctx else ""
        _fail(f"{exc.format_message()}{hint}", 2)
    except click.ClickException as exc:
        _fail(exc.format_message(), exc.exit_code)
    except click.Abort:
        _fail("aborted", 130)
    except errors.ClubwireError as exc:
        _fail(exc.detail, 1)
    except sqlalchemy.exc.OperationalError as exc:
        _fail(f"cannot use the database: {exc.orig.__class__.__name__}: {_first_line(exc.orig)}", 1)


def _fail(message: str, code: int) -> None:
    click.echo(f"clubwire: error: {message}", err=True)
    sys.exit(code)


def _first_line(error: BaseException | None) -> str:
    return str(error).strip().splitlines()[0] if error and str(error).strip() else "unknown"


# -- plumbing -------------------------------------------------------------------------------


def _settings() -> Settings:
    return load_settings()


@contextmanager
def _transaction(settings: Settings) -> Iterator[Session]:
    """One transaction on a migrated database (the embedded SQLite is migrated on the spot)."""
    engine = database.engine_for(settings)
    try:
        if settings.is_sqlite:
            migrate.upgrade(engine)
        else:
            migrate.require_head(engine)
        with database.sessions(engine).begin() as session:
            yield session
    finally:
        engine.dispose()


def _print_json(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def _print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        click.echo(
            "  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        )


# -- migrate, serve -------------------------------------------------------------------------


@cli.command("migrate")
def migrate_command() -> None:
    """Upgrade the database schema to the newest version."""
    settings = _settings()
    engine = database.engine_for(settings)
    try:
        migrate.upgrade(engine)
        click.echo(f"Database schema is at revision {migrate.current(engine)}.")
    finally:
        engine.dispose()


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
def serve(host: str, port: int) -> None:
    """Serve the HTTP API (the embedded SQLite database is migrated first)."""
    from clubwire import server

    settings = _settings()
    server.prepare_database(settings)
    server.run(settings, host, port)


# -- clubs ----------------------------------------------------------------------------------


@cli.group()
def club() -> None:
    """Clubs and their Webhooks & API module."""


@club.command("create")
@click.argument("slug")
@click.option("--name", required=True, help="The club's display name.")
@JSON_OPTION
def club_create(slug: str, name: str, as_json: bool) -> None:
    """Create a club (its module starts off)."""
    settings = _settings()
    with _transaction(settings) as session:
        created = clubs.create_club(session, slug, name, timestamps.utc_now())
        record = clubs.describe(created, settings.club_base_url(slug))
    if as_json:
        _print_json(record)
    else:
        click.echo(f"Created club {slug} ({record['id']}); Webhooks & API is off.")


@club.command("module")
@click.argument("slug")
@click.argument("state", type=click.Choice(["on", "off"]))
@JSON_OPTION
def club_module(slug: str, state: str, as_json: bool) -> None:
    """Switch the club's Webhooks & API module on or off."""
    settings = _settings()
    with _transaction(settings) as session:
        changed = clubs.set_webhooks_module(session, slug, state == "on", timestamps.utc_now())
        record = clubs.describe(changed, settings.club_base_url(slug))
    if as_json:
        _print_json(record)
    else:
        click.echo(f"Webhooks & API is {state} for {slug}.")


@club.command("list")
@JSON_OPTION
def club_list(as_json: bool) -> None:
    """List every club."""
    settings = _settings()
    with _transaction(settings) as session:
        records = [
            clubs.describe(c, settings.club_base_url(c.slug)) for c in clubs.list_clubs(session)
        ]
    if as_json:
        _print_json(records)
        return
    rows = [
        [str(r["slug"]), str(r["name"]), "on" if r["webhooksEnabled"] else "off", str(r["baseUrl"])]
        for r in records
    ]
    _print_table(rows, ["SLUG", "NAME", "MODULE", "BASE URL"])


# -- programs -------------------------------------------------------------------------------


@cli.group()
def program() -> None:
    """Programs synced from the platform."""


@program.command("import")
@click.argument("slug")
@click.argument("file", type=click.File("rb"))
@JSON_OPTION
def program_import(slug: str, file: BinaryIO, as_json: bool) -> None:
    """Upsert the programs of FILE (a JSON array; '-' reads stdin) into the club."""
    records = _read_programs(file.read(), getattr(file, "name", "<stdin>"))
    with _transaction(_settings()) as session:
        counts = program_service.import_programs(
            session, clubs.get_club(session, slug), records, timestamps.utc_now()
        )
    summary = {outcome.value: counts[outcome] for outcome in program_service.Outcome}
    if as_json:
        _print_json(summary)
    else:
        click.echo(
            f"Imported {len(records)} programs into {slug}: "
            + ", ".join(f"{n} {outcome}" for outcome, n in summary.items())
            + "."
        )


def _read_programs(raw: bytes, name: str) -> list[programs.ProgramRecord]:
    try:
        items = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise errors.InvalidInput(f"{name} is not JSON: {exc}") from None
    if not isinstance(items, list):
        raise errors.InvalidInput(f"{name} must hold a JSON array of programs.")
    records = [_program_record(item, index, name) for index, item in enumerate(items)]
    seen: set[str] = set()
    for record in records:
        if record.id in seen:
            raise errors.InvalidInput(f"{name}: the id {record.id!r} appears twice.")
        seen.add(record.id)
    return records


def _program_record(item: object, index: int, name: str) -> programs.ProgramRecord:
    try:
        return programs.ProgramRecord.model_validate(item)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "item"
        raise errors.InvalidInput(f"{name}: program {index + 1}: {where}: {first['msg']}") from None


# -- keys -----------------------------------------------------------------------------------


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
    with _transaction(_settings()) as session:
        record, value = keys.create_key(
            session, clubs.get_club(session, slug), chosen, name, timestamps.utc_now()
        )
        described = keys.describe(record)
    if as_json:
        _print_json({"key": value, **described})
    else:
        click.echo(value)
        click.echo("This key is shown once: store it now.", err=True)


@key.command("list")
@click.argument("slug")
@JSON_OPTION
def key_list(slug: str, as_json: bool) -> None:
    """List the club's API keys (never their secrets)."""
    with _transaction(_settings()) as session:
        records = [
            keys.describe(k) for k in keys.list_keys(session, clubs.get_club(session, slug).id)
        ]
    if as_json:
        _print_json(records)
        return
    rows = [
        [
            str(r["prefix"]),
            str(r["name"]) or "-",
            " ".join(r["scopes"]),  # type: ignore[arg-type]
            str(r["createdAt"]),
            str(r["lastUsedAt"] or "never"),
            str(r["status"]),
        ]
        for r in records
    ]
    _print_table(rows, ["PREFIX", "NAME", "SCOPES", "CREATED", "LAST USED", "STATUS"])


@key.command("revoke")
@click.argument("slug")
@click.argument("prefix")
@JSON_OPTION
def key_revoke(slug: str, prefix: str, as_json: bool) -> None:
    """Revoke a key at once and for good (revoking again changes nothing)."""
    with _transaction(_settings()) as session:
        revoked = keys.revoke_key(
            session, clubs.get_club(session, slug).id, prefix, timestamps.utc_now()
        )
        described = keys.describe(revoked)
    if as_json:
        _print_json(described)
    else:
        click.echo(f"Key {prefix} is revoked.")


# -- demo -----------------------------------------------------------------------------------


@cli.command()
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=8000, show_default=True, type=click.IntRange(1, 65535))
def demo(host: str, port: int) -> None:
    """Seed a demo club with programs and a key, print a ready curl, and serve."""
    from clubwire import server
    from clubwire.services import demo as demo_service

    settings = _settings().model_copy(update={"public_url": f"http://{host}:{port}"})
    server.prepare_database(settings)
    with _transaction(settings) as session:
        seeded = demo_service.seed(session, timestamps.utc_now())
    base_url = settings.club_base_url(seeded.slug)
    click.echo(
        f"\nclubwire demo: club {seeded.slug!r} with {seeded.program_count} programs, module on.\n"
        f"API key (shown once): {seeded.key}\n\n"
        f"Try it:\n  curl -s -H 'Authorization: Bearer {seeded.key}' {base_url}/api/v1/programs\n\n"
        f"API document: {base_url}/api/v1/openapi.json\nPress Ctrl-C to stop.\n"
    )
    server.run(settings, host, port)
