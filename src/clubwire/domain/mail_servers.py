"""The SMTP server emails go through, read from ``CLUBWIRE_SMTP_URL``:
``smtp://user:password@host:587`` (STARTTLS when the server offers it) or ``smtps://…``
(TLS from the first byte). Errors never quote the URL: it may hold a password."""

from __future__ import annotations

from dataclasses import dataclass, field
from urllib.parse import unquote, urlsplit

PORTS = {"smtp": 25, "smtps": 465}


@dataclass(frozen=True, slots=True)
class MailServer:
    host: str
    port: int
    implicit_tls: bool
    username: str | None = None
    password: str | None = field(default=None, repr=False)


def parse(url: str) -> MailServer:
    """The server ``url`` names; ValueError, in words that leave the URL out, when it names
    none."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        raise ValueError("is not a URL like smtp://user:password@host:587") from None
    if parts.scheme not in PORTS:
        raise ValueError("must start with smtp:// or smtps://")
    if not parts.hostname:
        raise ValueError("names no host (smtp://user:password@host:587)")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ValueError("must name a server only, with no path or query")
    if (parts.username is None) != (parts.password is None):
        raise ValueError("must give both a user and a password, or neither")
    return MailServer(
        host=parts.hostname,
        port=port or PORTS[parts.scheme],
        implicit_tls=parts.scheme == "smtps",
        username=None if parts.username is None else unquote(parts.username),
        password=None if parts.password is None else unquote(parts.password),
    )
