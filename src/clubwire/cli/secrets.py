"""``clubwire secrets rekey``: re-seal the stored secrets with a new secret key.

The new key is the process's ``CLUBWIRE_SECRET_KEY``: the key every process is then started
with, already in its configuration, so a typing slip cannot seal the secrets with a key no one
has. The old key is read once from a file, standard input or a prompt without echo, never
from the command line (other users can read a process's arguments).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from clubwire import errors
from clubwire.cli.base import cli, settings, transaction
from clubwire.domain import sealing
from clubwire.services import secret_keys
from clubwire.settings import MIN_SECRET_LENGTH


@cli.group("secrets")
def secrets_group() -> None:
    """The secret key that encrypts webhook signing secrets (and endpoints' headers) at rest."""


@secrets_group.command("rekey")
@click.option(
    "--old-key-file",
    default="-",
    show_default=True,
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="A file holding the old key; '-' reads it from standard input (a prompt without "
    "echo on a terminal).",
)
def rekey(old_key_file: str) -> None:
    """Re-seal the stored secrets with the new key in CLUBWIRE_SECRET_KEY.

    Every endpoint's signing secret, and its headers of its own, is opened with the old key
    and sealed with the new one, in one transaction: all or nothing. Stop every serve and
    worker first.
    """
    current = settings()
    old, new = _old_key(old_key_file), current.secret_key_value()
    if old == new:
        raise errors.InvalidInput(
            "The old key is CLUBWIRE_SECRET_KEY itself: set CLUBWIRE_SECRET_KEY to the new key."
        )
    with transaction(current) as session:
        done = secret_keys.rekey(session, sealing.Sealer(old), sealing.Sealer(new))
    if done.already:
        click.echo("The stored secrets are already sealed with CLUBWIRE_SECRET_KEY: no change.")
        return
    noun = "secret" if done.secrets == 1 else "secrets"
    click.echo(
        f"Re-sealed {done.secrets} endpoint signing {noun} with CLUBWIRE_SECRET_KEY. "
        "Start every process with it now; the old key opens nothing any more."
    )


def _old_key(path: str) -> str:
    key = _read_old_key(path).strip()
    if len(key) < MIN_SECRET_LENGTH:
        raise errors.InvalidInput(
            f"The old key has fewer than {MIN_SECRET_LENGTH} characters: it cannot be a key "
            "clubwire used."
        )
    return key


def _read_old_key(path: str) -> str:
    if path != "-":
        return Path(path).read_text(encoding="utf-8", errors="replace")
    if sys.stdin.isatty():
        return str(click.prompt("Old secret key", hide_input=True, err=True))
    return sys.stdin.readline()
