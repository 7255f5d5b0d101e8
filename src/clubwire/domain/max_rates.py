"""An endpoint's max rate: at most how many deliveries a second it is sent, or no limit.

The delivery engine holds all its workers together to it, to within one claim batch; without
one, an endpoint gets as many as the workers' concurrency limits allow. The highest max rate
is 1000 a second, far above what a club's events come to: a receiver that can take more needs
no limit, and the engine never has to space deliveries less than a millisecond apart. Text is
read strictly, as ASCII digits alone: ``int()`` would also take spaces, underscores and other
scripts' digits (``"５"``), which nobody typing a rate here means.
"""

from __future__ import annotations

import re
from enum import Enum

from clubwire.domain import text

LOWEST = 1
HIGHEST = 1000
RULE = f"a whole number of deliveries per second, from {LOWEST} to {HIGHEST}"
NO_LIMIT_WORDS = frozenset({"", "none"})  # what may be typed for no limit
SHOWN = 20  # characters of refused input quoted in the message

_DIGITS = re.compile(r"[0-9]+")
_NEGATIVE = re.compile(r"-[0-9]+")


class Unlimited(Enum):
    """No max rate: said apart from "not given" (None) where a change may clear it."""

    NO_LIMIT = "no limit"


NO_LIMIT = Unlimited.NO_LIMIT
MaxRate = int | Unlimited


class BadRate(ValueError):
    """Why a max rate was refused, in words for the person who gave it."""


def checked(rate: MaxRate) -> MaxRate:
    """``rate`` itself when it is one; else BadRate."""
    if isinstance(rate, Unlimited):
        return rate
    if isinstance(rate, bool) or not isinstance(rate, int):
        raise BadRate(f"{rate!r} is not a max rate: it must be {RULE}.")
    return _in_range(rate, str(rate))


def parse(typed: str) -> MaxRate:
    """The max rate in ``typed`` (a form field, a command-line option): empty or ``none`` for
    no limit, else ASCII digits alone; BadRate saying what is wrong otherwise."""
    if typed in NO_LIMIT_WORDS:
        return NO_LIMIT
    quoted = _quoted(typed)
    if _DIGITS.fullmatch(typed):
        digits = typed.lstrip("0") or "0"  # a huge number is never converted
        return _in_range(int(digits) if len(digits) <= len(str(HIGHEST)) else HIGHEST + 1, quoted)
    if _NEGATIVE.fullmatch(typed):
        return _in_range(-1, quoted)
    if typed.strip() != typed:
        raise BadRate(f"{quoted} is not a max rate: remove the spaces around the number.")
    raise BadRate(f"{quoted} is not a max rate: write {RULE}, with the digits 0-9 alone.")


def _quoted(typed: str) -> str:
    """``typed`` in quotes on one line: cut short, every character that is not printable
    (line breaks, NUL, bidi overrides, lone surrogates) written as its escape."""
    cut = typed if len(typed) <= SHOWN else typed[: SHOWN - 1] + text.ELLIPSIS
    shown = (c if c.isprintable() else c.encode("unicode_escape").decode() for c in cut)
    return f'"{"".join(shown)}"'


def _in_range(rate: int, quoted: str) -> int:
    if rate < LOWEST:
        raise BadRate(f"{quoted} is not a max rate: the lowest is {LOWEST} delivery per second.")
    if rate > HIGHEST:
        raise BadRate(
            f"{quoted} is not a max rate: the highest is {HIGHEST} deliveries per second."
        )
    return rate


def in_words(rate: int | None) -> str:
    """A stored max rate in words, for pages and tables."""
    if rate is None:
        return "no limit"
    return f"{rate} {'delivery' if rate == 1 else 'deliveries'} per second"
