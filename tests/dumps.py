"""A whole database as text, the way an operator would dump it (``pg_dump``; SQLite's
``.dump``), with its binary columns decoded, to search for what must not be in it."""

from __future__ import annotations

import re
import sqlite3
import subprocess
from collections.abc import Iterable

from sqlalchemy.engine import make_url

from clubwire.domain import personal_data

# Binary values as each dump writes them: ``X'7b22…'`` (SQLite), ``\x7b22…`` (pg_dump's COPY).
_SQLITE_BLOB = re.compile(r"X'([0-9A-Fa-f]*)'")
_POSTGRES_BYTEA = re.compile(r"\\\\x([0-9a-f]*)")
# pg_dump's guard lines, with a key drawn afresh for each dump.
_RESTRICT = re.compile(r"^\\(un)?restrict .*$", re.MULTILINE)


def dump(database_url: str) -> str:
    """The dump of the database at ``database_url``, each binary value followed by its bytes
    decoded as UTF-8."""
    url = make_url(database_url)
    if url.get_backend_name() == "sqlite":
        with sqlite3.connect(str(url.database)) as connection:
            text = "\n".join(connection.iterdump())
        blobs = _SQLITE_BLOB
    else:
        plain = url.set(drivername="postgresql").render_as_string(hide_password=False)
        text = subprocess.run(
            ["pg_dump", "--no-owner", plain], check=True, capture_output=True, text=True
        ).stdout
        text = _RESTRICT.sub("", text)
        blobs = _POSTGRES_BYTEA
    decoded = (bytes.fromhex(found).decode("utf-8", "replace") for found in blobs.findall(text))
    return "\n".join([text, *decoded])


def found_in(text: str, values: Iterable[str]) -> list[str]:
    """The spellings of ``values`` (as they are, JSON-escaped, URL-encoded, ...) that ``text``
    holds, in any case."""
    folded = text.casefold()
    return [
        spelling for spelling in personal_data.spellings(values) if spelling.casefold() in folded
    ]
