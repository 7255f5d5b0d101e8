"""``clubwire listen``: a local HTTPS receiver that verifies and prints every delivery."""

from __future__ import annotations

import asyncio
import shlex
import signal
import socket
import string
import sys
import time
from pathlib import Path

import click
import orjson
import pydantic

from clubwire import errors, receiving
from clubwire.cli.base import cli
from clubwire.domain import text, webhook_secrets
from clubwire.settings import Settings, load_settings

PATH = "/webhooks"


class HeaderValue(click.ParamType[str, str]):
    """A header's value as the receiver sends it, whatever it says: visible ASCII, spaces and
    tabs. Anything else is refused (a line break would end the header and start another)."""

    name = "header value"
    allowed = frozenset(string.printable) - frozenset("\n\r\x0b\x0c")

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> str:
        if not all(char in self.allowed for char in value):
            self.fail("must be visible ASCII characters and spaces, on one line", param, ctx)
        return value


@cli.command()
@click.option(
    "--port",
    default=8443,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on (0: any free one).",
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; the certificate is for localhost, 127.0.0.1 and ::1.",
)
@click.option(
    "--secret",
    envvar="CLUBWIRE_LISTEN_SECRET",
    show_envvar=True,
    required=True,
    help="The endpoint's signing secret (whsec_…); '-' reads it from stdin.",
)
@click.option(
    "--status",
    default=200,
    show_default=True,
    type=click.IntRange(200, 599),
    help="What to answer deliveries that verify (the others get 400).",
)
@click.option(
    "--retry-after",
    default=None,
    metavar="VALUE",
    type=HeaderValue(),
    help="Send 'Retry-After: VALUE' with that answer: seconds (120) or an HTTP-date "
    "(Sun, 06 Nov 1994 08:49:37 GMT), or anything else, to see what clubwire makes of it.",
)
def listen(port: int, host: str, secret: str, status: int, retry_after: str | None) -> None:
    """Receive webhooks over local HTTPS: verify, print, and answer each delivery."""
    secret = _secret(secret)
    tls = receiving.authority(_home() / receiving.TLS_FOLDER)
    listening = receiving.bind(host, port)
    answer = receiving.Answer(status, retry_after=retry_after)
    receiver = receiving.Receiver(secret, _show, lambda: answer)
    _introduce(receiving.url_of(listening, PATH), tls, answer)
    asyncio.run(_listen(receiver, tls, listening))
    click.echo("clubwire listen: stopped.", err=True)


def _home() -> Path:
    """The settings' home folder: the receiver needs no database and no secret key."""
    try:
        return Settings().home
    except pydantic.ValidationError:
        return load_settings().home  # raises the one-line error for the first bad setting


def _secret(given: str) -> str:
    secret = (_read_secret() if given == "-" else given).strip()
    if not secret.startswith(webhook_secrets.PREFIX):
        raise errors.InvalidInput(
            f"--secret is the endpoint's signing secret, {webhook_secrets.PREFIX}… "
            "(printed once by `clubwire endpoint create` or `endpoint rotate-secret`)."
        )
    return secret


def _read_secret() -> str:
    if sys.stdin.isatty():
        return str(click.prompt("Signing secret", hide_input=True, err=True))
    return sys.stdin.readline()


def _introduce(url: str, tls: receiving.Authority, answer: receiving.Answer) -> None:
    bundle = shlex.quote(str(tls.bundle.resolve()))
    answering = f"{answer.status}"
    if answer.retry_after is not None:
        answering += f" with Retry-After: {answer.retry_after}"
    click.echo(
        f"clubwire listen: receiving webhooks at {url} (any path); answering {answering} to "
        "deliveries whose signature verifies, 400 to the others.\n\n"
        "Register that URL as an endpoint, and deliver to it, with these settings (the worker, "
        "or `clubwire serve`\non SQLite, trusts this receiver's certificate by the first; the "
        "second allows a local address):\n"
        f"  CLUBWIRE_CA_BUNDLE={bundle} CLUBWIRE_ALLOW_PRIVATE_TARGETS=1\n\n"
        "Ctrl-C stops.\n"
    )


def _show(arrival: receiving.Arrival) -> None:
    """In one write: piped into another program, a block is never seen in part."""
    click.echo(block(arrival), nl=False)


def block(arrival: receiving.Arrival) -> str:
    """What ``listen`` prints for a delivery: its summary; when verified, the signature's
    age and the body (indented JSON when it is an object), then a blank line. The body's
    control characters and bidirectional overrides are shown escaped (``\x1b``): a body
    never moves the terminal's cursor, clears it or reorders what it shows."""
    lines = [f"{time.strftime('%H:%M:%S')} {arrival.summary()}"]
    if arrival.signed_at is not None:
        age = round(time.time() - arrival.signed_at)
        lines.append(f"  signature  t={arrival.signed_at} ({age} s ago): v1 matches the secret")
        envelope = arrival.envelope()
        shown = (
            orjson.dumps(envelope, option=orjson.OPT_INDENT_2).decode()
            if envelope is not None
            else arrival.body.decode(errors="replace")
        )
        lines += [f"  {text.cleaned(line, sys.maxsize)}" for line in shown.splitlines()]
        lines.append("")  # a blank line after the body
    return "\n".join(lines) + "\n"


async def _listen(
    receiver: receiving.Receiver, tls: receiving.Authority, listening: socket.socket
) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    async with receiving.serving(receiver, tls, listening):
        await stop.wait()
