"""An endpoint's headers of its own: static headers (an ``X-Api-Key``, an ``Authorization``)
that a receiver behind an API gateway or a no-code tool needs on every request, sent beside
ours on every delivery and Send test.

A name is an HTTP token (RFC 9110 §5.6.2), at most ``NAME_LIMIT`` characters, compared without
regard to case, so an endpoint never has two alike. A value is 1 to ``VALUE_LIMIT`` visible
ASCII characters (VCHAR), with single spaces between them: one line, nothing a receiver's
framework could read two ways. What surrounds a name or a value (spaces, tabs) is not part of
it, as in HTTP itself. The names clubwire sets and those HTTP keeps for itself are refused
(``RESERVED``, ``RESERVED_PREFIXES``), so a header of an endpoint's own can never change how a
delivery is framed, signed or routed; ``beside`` lets ours win all the same.

Two more names are refused beyond the ones every sender owns: ``Proxy-Connection`` (an old
hop-by-hop header that HTTP/2 forbids) and ``Expect`` (``100-continue`` changes how the
request is sent, which is the sender's to decide). ``Cookie`` is allowed: clubwire keeps no
cookies, so a static one is simply a credential, like ``Authorization``.

A value is a secret. No message here ever holds one, nor the text a name was read from when
that text is not a name (it may be a value typed in the wrong place): only a valid name is
quoted, and a bad one is described by its first character that HTTP does not allow.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

MAX_HEADERS = 10
NAME_LIMIT = 100
VALUE_LIMIT = 1000
MASK = "••••••••"  # what a page shows of a saved value: the same whatever its length
NAME_CHARACTERS = "letters, digits and ! # $ % & ' * + - . ^ _ ` | ~"  # a token's (tchar)

_NOT_TOKEN = re.compile(r"[^!#$%&'*+\-.^_`|~0-9A-Za-z]")
_VALUE = re.compile(r"[!-~]+(?: [!-~]+)*")
_SPACE = " \t"  # what HTTP strips around a field's value (OWS)

_OURS = "clubwire sets it on every delivery"
_HOP_BY_HOP = "it is a hop-by-hop header of HTTP, which never reaches the receiver"
# Each reserved name, in lower case, and why.
RESERVED: Mapping[str, str] = {
    "host": "HTTP sends the receiver's host, from the endpoint's URL",
    "transfer-encoding": "HTTP frames the body with it",
    "user-agent": _OURS,
    "accept-encoding": "clubwire asks for no compression",
    "connection": _HOP_BY_HOP,
    "keep-alive": _HOP_BY_HOP,
    "proxy-authenticate": _HOP_BY_HOP,
    "proxy-authorization": _HOP_BY_HOP,
    "proxy-connection": _HOP_BY_HOP,
    "te": _HOP_BY_HOP,
    "trailer": _HOP_BY_HOP,
    "upgrade": _HOP_BY_HOP,
    "expect": "it changes how the request is sent, which is clubwire's to decide",
    "traceparent": "it carries the delivery's trace (W3C Trace Context), which clubwire sets",
    "tracestate": "it carries the delivery's trace (W3C Trace Context), which clubwire sets",
}
# Each reserved beginning of a name, in lower case, and why.
RESERVED_PREFIXES: Mapping[str, str] = {
    "content-": "Content-* headers describe the body, which clubwire writes",
    "x-service-": "X-Service-* headers are clubwire's own: its signature, event and delivery",
    "webhook-": "webhook-* headers carry the Standard Webhooks signature clubwire sends",
}


class BadHeader(ValueError):
    """Why headers were refused, in words for the person who gave them (never a value)."""


class BadName(BadHeader):
    """A header's name was refused."""


class BadValue(BadHeader):
    """A header's value was refused."""


class Header(NamedTuple):
    name: str
    value: str


def parse(line: str) -> Header:
    """The header written in ``line`` as ``Name: value``; BadHeader saying what is wrong."""
    typed_name, colon, typed_value = line.partition(":")
    if not colon:
        raise BadHeader("A header is written Name: value, with a colon after its name.")
    return header(typed_name, typed_value)


def header(typed_name: str, typed_value: str) -> Header:
    """The header of this name and value, as typed in two fields; BadName or BadValue."""
    checked = name(typed_name)
    return Header(checked, value(checked, typed_value))


def name(typed: str) -> str:
    """``typed`` as a header's name, spaces around it left out; BadName when it is not a
    token or is reserved."""
    found = token(typed)
    why = reason_reserved(found)
    if why is not None:
        raise BadName(f"{found} cannot be one of an endpoint's headers: {why}.")
    return found


def token(typed: str) -> str:
    """``typed`` as HTTP would read a name, spaces around it left out; BadName when it is not
    one (reserved or not)."""
    found = typed.strip(_SPACE)
    if not found:
        raise BadName("A header's name is empty: give one, such as X-Api-Key.")
    if len(found) > NAME_LIMIT:
        raise BadName(f"A header's name has {len(found)} characters: at most {NAME_LIMIT}.")
    bad = _NOT_TOKEN.search(found)
    if bad is not None:
        raise BadName(
            f"A header's name holds {_described(bad.group())}, which HTTP does not allow in a "
            f"name: use {NAME_CHARACTERS}."
        )
    return found


def _described(character: str) -> str:
    if character == " ":
        return "a space"
    return f"the character U+{ord(character):04X}"


def reason_reserved(checked_name: str) -> str | None:
    """Why a name is clubwire's or HTTP's, not an endpoint's to set; None when it is free."""
    lowered = checked_name.lower()
    if lowered in RESERVED:
        return RESERVED[lowered]
    found = (why for start, why in RESERVED_PREFIXES.items() if lowered.startswith(start))
    return next(found, None)


def value(checked_name: str, typed: str) -> str:
    """``typed`` as the value of the header ``checked_name``, spaces around it left out;
    BadValue saying what is wrong, without the value."""
    found = typed.strip(_SPACE)
    of = f"The value of {checked_name}"
    if not found:
        raise BadValue(f"{of} is empty: give 1 to {VALUE_LIMIT} characters.")
    if len(found) > VALUE_LIMIT:
        raise BadValue(f"{of} has {len(found)} characters: at most {VALUE_LIMIT}.")
    if _VALUE.fullmatch(found) is None:
        raise BadValue(f"{of} {_unsent(found)}: it must be visible ASCII characters on one line.")
    return found


def _unsent(found: str) -> str:
    """What ``found`` (not a valid value) holds that a value may not."""
    if "\r" in found or "\n" in found:
        return "holds a line break"
    if not found.isascii():
        return "holds a character that is not ASCII (a letter with an accent, a curly quote…)"
    if "  " in found:
        return "holds two spaces in a row"
    return "holds a control character (a tab, NUL or DEL)"


def changed(
    saved: Sequence[Header], given: Sequence[Header], removed: Iterable[str] = ()
) -> tuple[Header, ...]:
    """``saved`` with the names in ``removed`` taken out, then each header ``given`` set
    (checked again, however it was made): in the place of a saved one of the same name
    (spelled as given), or else after them. BadHeader when one is not valid, a name is given
    twice, a removed one is not there, or the result would be more than ``MAX_HEADERS``."""
    kept = list(saved)
    for typed in removed:
        gone = token(typed)
        place = _place(kept, gone)
        if place is None:
            raise BadName(f"{gone} is not one of this endpoint's headers.")
        del kept[place]
    seen: set[str] = set()
    for typed_name, typed_value in given:
        new = header(typed_name, typed_value)
        if new.name.lower() in seen:
            raise BadName(f"{new.name} is given twice: give each header once.")
        seen.add(new.name.lower())
        place = _place(kept, new.name)
        if place is None:
            kept.append(new)
        else:
            kept[place] = new
    if len(kept) > MAX_HEADERS:
        raise BadHeader(
            f"An endpoint has at most {MAX_HEADERS} headers of its own, and this would make "
            f"{len(kept)}: remove one first."
        )
    return tuple(kept)


def _place(headers: Sequence[Header], wanted: str) -> int | None:
    lowered = wanted.lower()
    return next((i for i, found in enumerate(headers) if found.name.lower() == lowered), None)


def dumps(headers: Sequence[Header]) -> str:
    """The headers as one document to seal: the JSON of ``[[name, value], …]``, in order."""
    return json.dumps([list(found) for found in headers], separators=(",", ":"))


def loads(document: str) -> tuple[Header, ...]:
    """The headers ``dumps`` wrote."""
    return tuple(Header(name, value) for name, value in json.loads(document))


def masked(found: Header) -> str:
    """A saved header as a page shows it: its name, and a mask for its value."""
    return f"{found.name}: {MASK}"


def beside(ours: Mapping[str, str], theirs: Iterable[Header]) -> dict[str, str]:
    """An attempt's headers: an endpoint's own, then ours. One of theirs that is reserved or
    named like one of ours (in any case) is left out: ours always win."""
    taken = {found.lower() for found in ours}
    sent = {
        found.name: found.value
        for found in theirs
        if found.name.lower() not in taken and reason_reserved(found.name) is None
    }
    return {**sent, **ours}
