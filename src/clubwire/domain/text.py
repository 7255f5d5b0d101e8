"""Text from outside, made fit to store and to show, where it enters.

Two kinds of text come in. What people and programs *give* us (forms, API bodies, command
line files) is refused when the database cannot hold it: :func:`refusal` says why; a name,
one line that people read, is refused as well when it holds a control, a line break or a
character that reorders text on screen: :func:`name_refusal`. What
others *answer* (a receiver's status line, headers and body; the words of an error) is never
refused but :func:`cleaned`: valid Unicode, no control characters, no bidirectional
overrides, cut to the column it goes into. Both are cheap when there is nothing to do, so they
sit on hot paths.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

ELLIPSIS = "…"

# NUL, which PostgreSQL's text cannot hold, and lone surrogates, which UTF-8 cannot encode
# (Python makes them from undecodable bytes with ``surrogateescape``).
_UNSTORABLE = re.compile(r"[\x00\ud800-\udfff]")
# Everything ``cleaned`` escapes: C0 and C1 controls but tab and line feed, DEL, lone
# surrogates, and the characters that reorder text on screen (bidi marks and overrides).
_UNSAFE = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


# What a name must not hold, besides what ``refusal`` refuses: C0 and C1 controls (tab, CR,
# LF and NEL among them), DEL, the line and paragraph separators, and the bidirectional marks,
# embeddings, overrides and isolates. One class for the check and the JSON Schema of a name.
_NOT_IN_A_NAME_CLASS = (
    r"\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
)
NAME_PATTERN = f"^[^{_NOT_IN_A_NAME_CLASS}]*$"
_NOT_IN_A_NAME = re.compile(f"[{_NOT_IN_A_NAME_CLASS}]")


def refusal(value: str) -> str | None:
    """Why the database cannot hold ``value``, in words for the person who sent it; else
    None."""
    found = _UNSTORABLE.search(value)
    if found is None:
        return None
    if found.group() == "\x00":
        return "must not contain NUL characters (\\u0000)"
    return "must be valid Unicode text (it holds a lone surrogate or an undecodable byte)"


def name_refusal(value: str) -> str | None:
    """Why ``value`` cannot be a name, in words for the person who sent it; else None."""
    problem = refusal(value)
    found = None if problem is not None else _NOT_IN_A_NAME.search(value)
    if found is None:
        return problem
    return (
        "must be one line, without control or text-direction characters "
        f"(it holds U+{ord(found.group()):04X})"
    )


def storable(value: str) -> str:
    """``value`` itself; ValueError (a validation error in a Pydantic model) when the
    database cannot hold it."""
    problem = refusal(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# A string field of a model that reads input: NUL and lone surrogates are refused (422).
# Its JSON Schema says NUL is refused (a lone surrogate cannot be sent as UTF-8 JSON anyway).
StorableText = Annotated[
    str, AfterValidator(storable), Field(json_schema_extra={"pattern": r"^[^\u0000]*$"})
]


def one_line_name(value: str) -> str:
    """``value`` itself; ValueError (a validation error in a Pydantic model) when it cannot
    be a name."""
    problem = name_refusal(value)
    if problem is not None:
        raise ValueError(problem)
    return value


# A name in a model that reads input: refused (422) as ``name_refusal`` says.
NameText = Annotated[
    str, AfterValidator(one_line_name), Field(json_schema_extra={"pattern": NAME_PATTERN})
]


def cleaned(value: str, limit: int) -> str:
    """``value`` safe to store and show, at most ``limit`` characters: each unsafe character
    written as its escape (``\\x00``, ``\\u202e``; an undecodable byte kept by
    ``surrogateescape`` as ``\\xff``), and cut with an ellipsis when too long."""
    if _UNSAFE.search(value) is not None:
        value = _UNSAFE.sub(_escape, value)
    if len(value) <= limit:
        return value
    return value[: max(0, limit - 1)] + ELLIPSIS


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, as surrogateescape keeps it
        return f"\\x{code - 0xDC00:02x}"
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}"
