"""Unit tests for an endpoint's max rate: what may be typed, and why the rest is refused."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import max_rates

DIGITS_ONLY = "is not a max rate: write a whole number of deliveries per second, from 1 to 1000"


@pytest.mark.parametrize(
    ("typed", "rate"),
    [("1", 1), ("20", 20), ("1000", 1000), ("0005", 5), ("", max_rates.NO_LIMIT)],
)
def test_parse_reads_digits_and_empty_or_none_as_no_limit(
    typed: str, rate: max_rates.MaxRate
) -> None:
    assert max_rates.parse(typed) == rate
    assert max_rates.parse("none") is max_rates.NO_LIMIT


@pytest.mark.parametrize(
    ("typed", "message"),
    [
        ("0", '"0" is not a max rate: the lowest is 1 delivery per second.'),
        ("-1", '"-1" is not a max rate: the lowest is 1 delivery per second.'),
        ("1001", '"1001" is not a max rate: the highest is 1000 deliveries per second.'),
        ("1e9", f'"1e9" {DIGITS_ONLY}, with the digits 0-9 alone.'),
        ("５", f'"５" {DIGITS_ONLY}, with the digits 0-9 alone.'),
        ("1_000", f'"1_000" {DIGITS_ONLY}, with the digits 0-9 alone.'),
        ("2.5", f'"2.5" {DIGITS_ONLY}, with the digits 0-9 alone.'),
        ("None", f'"None" {DIGITS_ONLY}, with the digits 0-9 alone.'),
        (" 5 ", '" 5 " is not a max rate: remove the spaces around the number.'),
        ("5\n", '"5\\n" is not a max rate: remove the spaces around the number.'),
        ("5\x00", f'"5\\x00" {DIGITS_ONLY}, with the digits 0-9 alone.'),
        ("\u202e5", f'"\\u202e5" {DIGITS_ONLY}, with the digits 0-9 alone.'),
        ("\udcff", f'"\\udcff" {DIGITS_ONLY}, with the digits 0-9 alone.'),
    ],
)
def test_parse_says_precisely_what_is_wrong(typed: str, message: str) -> None:
    with pytest.raises(max_rates.BadRate) as caught:
        max_rates.parse(typed)
    assert str(caught.value) == message


@pytest.mark.parametrize("typed", ["9" * 100_000, "0" * 50_000 + "1001", "-" + "9" * 100_000])
def test_a_huge_number_is_refused_without_being_converted(typed: str) -> None:
    with pytest.raises(max_rates.BadRate, match=r"the (highest|lowest) is") as caught:
        max_rates.parse(typed)
    assert len(str(caught.value)) < 120


def test_a_huge_string_is_quoted_cut_short() -> None:
    with pytest.raises(max_rates.BadRate) as caught:
        max_rates.parse("x" * 1_000_000)
    assert str(caught.value) == f'"{"x" * 19}…" {DIGITS_ONLY}, with the digits 0-9 alone.'


@given(st.integers(min_value=max_rates.LOWEST, max_value=max_rates.HIGHEST))
def test_every_allowed_rate_round_trips(rate: int) -> None:
    assert max_rates.parse(str(rate)) == rate
    assert max_rates.checked(rate) == rate


@given(st.text())
def test_any_text_is_a_rate_or_a_bad_rate(typed: str) -> None:
    """Never another exception, and a refusal's message is one line."""
    try:
        rate = max_rates.parse(typed)
    except max_rates.BadRate as refused:
        message = str(refused)
    else:
        lowest, highest = max_rates.LOWEST, max_rates.HIGHEST
        assert isinstance(rate, max_rates.Unlimited) or lowest <= rate <= highest
        return
    assert message.startswith('"')
    assert message.isprintable()


@pytest.mark.parametrize(
    ("rate", "message"),
    [
        (0, "0 is not a max rate: the lowest is 1 delivery per second."),
        (10**100, f"{10**100} is not a max rate: the highest is 1000 deliveries per second."),
        (True, f"True is not a max rate: it must be {max_rates.RULE}."),
    ],
)
def test_checked_refuses_numbers_out_of_range(rate: int, message: str) -> None:
    with pytest.raises(max_rates.BadRate) as caught:
        max_rates.checked(rate)
    assert str(caught.value) == message
    assert max_rates.checked(max_rates.NO_LIMIT) is max_rates.NO_LIMIT


@pytest.mark.parametrize(
    ("rate", "words"),
    [(None, "no limit"), (1, "1 delivery per second"), (20, "20 deliveries per second")],
)
def test_in_words(rate: int | None, words: str) -> None:
    assert max_rates.in_words(rate) == words
