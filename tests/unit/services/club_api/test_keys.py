"""What is kept of a client's headers when a key's use is noted (``keys.client_text``):
only what is printable, cut to fit its column."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.services.club_api import keys


@pytest.mark.parametrize(
    ("sent", "kept"),
    [
        (None, None),
        ("", None),
        ("curl/8.5.0", "curl/8.5.0"),
        ("Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (X11; Linux x86_64)"),
        ("evil\x1b[31mred\x1b[0m", "evil[31mred[0m"),
        ("a\tb\r\nc\x00d\x7fe\x85f", "abcdef"),
        ("abc\u202egnp.exe", "abcgnp.exe"),
        ("\u200e\u2066", None),
        ("caf\xe9 \xa0x", "café x"),
    ],
    ids=["none", "empty", "curl", "browser", "ansi", "controls", "bidi", "only-marks", "latin-1"],
)
def test_a_client_header_is_kept_without_what_is_not_printable(
    sent: str | None, kept: str | None
) -> None:
    assert keys.client_text(sent, keys.MAX_USER_AGENT_LENGTH) == kept


def test_a_long_user_agent_is_cut_to_200_characters() -> None:
    kept = keys.client_text("x" * 500, keys.MAX_USER_AGENT_LENGTH)
    assert kept == "x" * 199 + "…"


@given(st.text(alphabet=st.characters(codec="latin-1")), st.integers(1, 300))
def test_a_kept_header_is_printable_and_fits(sent: str, limit: int) -> None:
    kept = keys.client_text(sent, limit)
    assert kept is None or (kept.isprintable() and 0 < len(kept) <= limit)
