"""The ``clubwire`` command group and what every command shares."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO, TypeVar

import click
import orjson
import pydantic
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import text
from clubwire.settings import Settings, load_settings
from clubwire.storage import database, migrate

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="clubwire")
def cli() -> None:
    """clubwire: a club's data API and signed webhooks."""


def settings() -> Settings:
    return load_settings()


def prepare_database(current: Settings) -> None:
    """Migrate the embedded SQLite database; require PostgreSQL to have been migrated."""
    engine = database.engine_for(current)
    try:
        if current.is_sqlite:
            migrate.upgrade(engine)
        else:
            migrate.require_head(engine)
    finally:
        engine.dispose()


@contextmanager
def session_factory(current: Settings, worker: bool = False) -> Iterator[sessionmaker[Session]]:
    """Sessions on a ready database (the embedded SQLite is migrated on the spot)."""
    prepare_database(current)
    engine = database.engine_for(current, worker)
    try:
        yield database.sessions(engine)
    finally:
        engine.dispose()


@contextmanager
def transaction(current: Settings) -> Iterator[Session]:
    """One transaction on a ready database."""
    with session_factory(current) as sessions, sessions.begin() as session:
        yield session


INPUT_FILE = click.Path(exists=True, dir_okay=False, allow_dash=True)


def read_input(path: str, limit: int | None = None) -> tuple[bytes, str]:
    """The bytes of a file named on the command line ('-': standard input), and its name;
    refused beyond ``limit`` bytes, before more than that is read."""
    if path == "-":
        return _read(sys.stdin.buffer, "<stdin>", limit), "<stdin>"
    with Path(path).open("rb") as file:
        return _read(file, path, limit), path


def _read(file: BinaryIO, name: str, limit: int | None) -> bytes:
    raw = file.read() if limit is None else file.read(limit + 1)
    if limit is not None and len(raw) > limit:
        raise errors.InvalidInput(f"{name} is larger than {limit} bytes.")
    return raw


M = TypeVar("M", bound=pydantic.BaseModel)


def record_of(model: type[M], item: object, what: str) -> M:
    """``item`` of a file as ``model``, or one line that names it (``what``: the file and the
    item, say ``events.json: event 4``), its first field found wrong, and what is wrong."""
    try:
        return model.model_validate(item)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "item"
        raise errors.InvalidInput(f"{what}: {where}: {first['msg']}") from None


def storable(value: str, what: str) -> str:
    """``value``, unless the database cannot hold it (Linux hands a program the bytes of its
    arguments and input that are not UTF-8 as lone surrogates): then one line on why."""
    why = text.refusal(value)
    if why is not None:
        raise errors.InvalidInput(f"{what} {why}")
    return value


def print_json(value: Any) -> None:
    click.echo(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode())


def print_table(rows: list[list[str]], header: list[str]) -> None:
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        cells = (cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        click.echo("  ".join(cells).rstrip())


def cell(value: object, empty: str = "-") -> str:
    """A value as a table or a record shows it: ``empty`` when there is none."""
    return empty if value is None or value == "" else str(value)


def one_line(value: str, limit: int) -> str:
    """Someone else's text (a receiver's answer) made safe for a terminal: control characters
    escaped, so none can move the cursor or recolour the screen, and cut to ``limit``."""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in value)
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"
