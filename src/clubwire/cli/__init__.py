"""The ``clubwire`` command. Bad input: a non-zero exit and one readable line on stderr."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
import sqlalchemy.exc

from clubwire import errors

# Importing the command modules registers their commands.
from clubwire.cli import (  # noqa: F401
    clubs,
    deliveries,
    demo,
    endpoints,
    events,
    keys,
    listening,
    retention,
    secrets,
    serving,
    users,
)
from clubwire.cli.base import cli

__all__ = ["cli", "main"]


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
        _fail(f"cannot use the database: {type(exc.orig).__name__}: {_first_line(exc.orig)}", 1)


def _fail(message: str, code: int) -> None:
    click.echo(f"clubwire: error: {message}", err=True)
    sys.exit(code)


def _first_line(error: BaseException | None) -> str:
    lines = str(error).strip().splitlines() if error else []
    return lines[0] if lines else "unknown"
