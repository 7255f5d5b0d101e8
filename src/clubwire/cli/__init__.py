"""The ``clubwire`` command. Bad input: a non-zero exit and one readable line on stderr."""

from __future__ import annotations

import sys
from collections.abc import Sequence

import click
import sqlalchemy.exc

from clubwire import errors

# Importing the command modules registers their commands.
from clubwire.cli import (  # noqa: F401
    base,
    clubs,
    deliveries,
    demo,
    endpoints,
    events,
    keys,
    listening,
    members,
    retention,
    secrets,
    serving,
    users,
)
from clubwire.cli.base import cli
from clubwire.domain import text

__all__ = ["cli", "main"]

SHOWN_ARGUMENT = 60  # characters of a refused argument quoted in its error
UNQUOTED = ("--header",)  # options whose arguments may hold a secret: never quoted
MAX_MESSAGE = 2000


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line; every failure ends in one line on stderr and a non-zero exit."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        _check_arguments(args)
        cli.main(args=args, prog_name="clubwire", standalone_mode=False)
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


def _check_arguments(args: Sequence[str]) -> None:
    """Every argument may end up stored (a name, an email, a slug): one the database cannot
    hold is refused before any command runs, file names included, quoted unless it may hold
    a secret."""
    for before, arg in zip(["", *args], args, strict=False):
        option = next((o for o in UNQUOTED if before == o or arg.startswith(f"{o}=")), None)
        shown = f"of {option}" if option else f'"{text.cleaned(arg, SHOWN_ARGUMENT)}"'
        base.storable(arg, f"the argument {shown}")


def _fail(message: str, code: int) -> None:
    """One line, whatever the message holds (input quoted in it is escaped)."""
    click.echo(f"clubwire: error: {text.cleaned(message, MAX_MESSAGE)}", err=True)
    sys.exit(code)


def _first_line(error: BaseException | None) -> str:
    lines = str(error).strip().splitlines() if error else []
    return lines[0] if lines else "unknown"
