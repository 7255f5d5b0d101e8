"""How the CLI shows text that others wrote (a receiver's answer) in a terminal."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.cli.base import one_line


@pytest.mark.parametrize(
    ("given_text", "shown"),
    [
        ("ok", "ok"),
        ("Zoë 🥌", "Zoë 🥌"),
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("two\nlines\r\n", "two\\nlines\\r\\n"),
        ("bell\x07 nul\x00", "bell\\x07 nul\\x00"),
        ("bidi\u202eevil", "bidi\\u202eevil"),
    ],
)
def test_control_characters_are_escaped(given_text: str, shown: str) -> None:
    assert one_line(given_text, 100) == shown


def test_long_text_is_cut_with_an_ellipsis() -> None:
    assert one_line("a" * 100, 10) == "a" * 9 + "…"


@given(st.text(), st.integers(min_value=1, max_value=200))
def test_the_result_is_printable_and_within_the_limit(value: str, limit: int) -> None:
    shown = one_line(value, limit)
    assert shown.isprintable()
    assert len(shown) <= limit
