"""``clubwire user create``: staff accounts for the settings area."""

from __future__ import annotations

import sys

import click

from clubwire.cli.base import JSON_OPTION, cli, print_json, settings, storable, transaction
from clubwire.domain import timestamps
from clubwire.services.staff import users


@cli.group()
def user() -> None:
    """Staff accounts (superadmins and club admins)."""


@user.command("create")
@click.argument("email")
@click.option("--superadmin", is_flag=True, help="May manage every club and its module.")
@click.option("--club", "club_slugs", multiple=True, help="A club this user administers; repeat.")
@click.option("--password-stdin", is_flag=True, help="Read the password from stdin.")
@JSON_OPTION
def user_create(
    email: str, superadmin: bool, club_slugs: tuple[str, ...], password_stdin: bool, as_json: bool
) -> None:
    """Create a staff account; the password is asked for (or read from stdin)."""
    if password_stdin:
        line = sys.stdin.buffer.readline().decode("utf-8", "surrogateescape")
        password = line.rstrip("\r\n")
    else:
        password = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    storable(password, "the password")  # else no one could type it into the sign-in form
    with transaction(settings()) as session:
        created = users.create_user(
            session, email, password, timestamps.utc_now(), superadmin, club_slugs
        )
        record = {
            "id": created.id,
            "email": created.email,
            "superadmin": created.is_superadmin,
            "clubs": list(club_slugs),
        }
    if as_json:
        print_json(record)
    else:
        role = "superadmin" if superadmin else f"admin of {', '.join(club_slugs) or 'no club yet'}"
        click.echo(f"Created {created.email} ({role}).")
