"""Why an endpoint is off: each code's words, and words for anything else stored."""

from __future__ import annotations

import pytest

from clubwire.domain import off_reasons
from clubwire.domain.off_reasons import OffReason


@pytest.mark.parametrize(
    ("stored", "words"),
    [
        ("dead_in_a_row", "Switched off after 5 dead deliveries in a row"),
        ("gone", "Switched off: the receiver answered 410 Gone"),
        ("staff", "Switched off by a club admin"),
        ("superadmin", "Switched off by a superadmin"),
        (None, "Switched off"),
        ("", "Switched off"),
        ("Switched off by a user", "Switched off"),
        ("GONE", "Switched off"),
        ("<script>alert(1)</script>", "Switched off"),
    ],
)
def test_each_code_has_its_words_and_anything_else_reads_switched_off(
    stored: str | None, words: str
) -> None:
    assert off_reasons.in_words(stored) == words


def test_the_codes_are_the_stored_values() -> None:
    assert [reason.value for reason in OffReason] == [
        "dead_in_a_row",
        "gone",
        "staff",
        "superadmin",
    ]


@pytest.mark.parametrize(("superadmin", "reason"), [(False, "staff"), (True, "superadmin")])
def test_staff_switch_off_as_a_club_admin_or_a_superadmin(superadmin: bool, reason: str) -> None:
    assert off_reasons.by_staff(superadmin) == reason
