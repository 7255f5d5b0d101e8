"""The rule of every name (``domain.text.name_refusal``): one line, no control or
text-direction characters, storable (issue 31: club names kept CR, LF and U+0085)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import text

REFUSED = [
    "\r",
    "\n",
    "\t",
    "\x0b",
    "\x1b",
    "\x7f",
    "\x85",  # NEL
    "\x9b",
    "\u2028",
    "\u2029",
    "\u200e",
    "\u200f",
    "\u061c",
    "\u202a",
    "\u202e",
    "\u2066",
    "\u2069",
]


@pytest.mark.parametrize("char", REFUSED, ids=lambda c: f"U+{ord(c):04X}")
def test_controls_line_breaks_and_direction_characters_are_refused(char: str) -> None:
    why = text.name_refusal(f"Granite{char}Curling")
    assert why == (
        "must be one line, without control or text-direction characters "
        f"(it holds U+{ord(char):04X})"
    )


@pytest.mark.parametrize(
    "name",
    [
        "Granite Curling Club",
        "  Granite  ",  # spaces around are the caller's to strip
        "Curling Club de Québec",
        "カーリング",
        "نادي الكيرلنج",  # right-to-left text itself is fine: only the controls are refused
        "👨\u200d👩\u200d👧 Family League",  # a zero-width joiner belongs to an emoji
        "Club\u00a0Granite",
        "Ｇｒａｎｉｔｅ",  # lookalikes are text, not controls
    ],
)
def test_ordinary_names_pass(name: str) -> None:
    assert text.name_refusal(name) is None
    assert re.fullmatch(text.NAME_PATTERN, name)


@pytest.mark.parametrize(("name", "why"), [("a\x00b", "NUL"), ("a\udcffb", "valid Unicode")])
def test_what_the_database_cannot_hold_is_refused_as_anywhere(name: str, why: str) -> None:
    assert why in (text.name_refusal(name) or "")


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=30))
def test_the_documented_pattern_is_the_rule(name: str) -> None:
    assert (text.name_refusal(name) is None) == (re.fullmatch(text.NAME_PATTERN, name) is not None)


def test_a_model_field_refuses_with_the_same_words() -> None:
    with pytest.raises(ValueError, match="one line"):
        text.one_line_name("Granite\r\nCurling")
