"""Unit tests for base62, the alphabet of identifiers, keys and secrets."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import base62


def test_the_alphabet_is_digits_then_upper_then_lower_case_ascii_letters() -> None:
    assert base62.ALPHABET == "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    assert list(base62.ALPHABET) == sorted(base62.ALPHABET)  # so encodings sort as numbers


@pytest.mark.parametrize(
    ("number", "length", "expected"),
    [(0, 3, "000"), (61, 1, "z"), (62, 2, "10"), (62**2 - 1, 2, "zz"), (62**2, 2, "00")],
)
def test_encode_writes_the_number_zero_padded_to_the_length(
    number: int, length: int, expected: str
) -> None:
    assert base62.encode(number, length) == expected


@given(st.integers(0, 62**6 - 1), st.integers(0, 62**6 - 1))
def test_encodings_of_one_length_sort_as_their_numbers(first: int, second: int) -> None:
    assert (base62.encode(first, 6) < base62.encode(second, 6)) == (first < second)
