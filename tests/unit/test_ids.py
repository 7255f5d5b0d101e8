"""Unit tests for prefixed random identifiers."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from clubwire import ids
from clubwire.domain import base62


def test_new_id_is_the_prefix_an_underscore_and_20_base62_characters() -> None:
    assert re.fullmatch(r"org_[0-9A-Za-z]{20}", ids.new_id("org"))


def test_new_ids_are_distinct() -> None:
    assert len({ids.new_id("org") for _ in range(1000)}) == 1000


@pytest.mark.parametrize("length", [0, 1, 10, 32, 100])
def test_random_base62_has_the_asked_length_and_alphabet(length: int) -> None:
    value = ids.random_base62(length)
    assert len(value) == length
    assert set(value) <= set(base62.ALPHABET)


def test_random_base62_uses_the_whole_alphabet() -> None:
    assert set(ids.random_base62(5000)) == set(base62.ALPHABET)


def test_each_position_of_random_base62_takes_every_character() -> None:
    drawn = [ids.random_base62(20) for _ in range(3000)]
    for position in (0, 10, 19):  # a character missed: about 1e-19
        assert {value[position] for value in drawn} == set(base62.ALPHABET)


MOMENT = datetime(2026, 11, 27, 4, 45, 12, 345678, tzinfo=UTC)


def test_a_sorted_id_has_the_shape_of_any_other() -> None:
    assert re.fullmatch(r"dlv_[0-9A-Za-z]{20}", ids.new_sorted_id("dlv", MOMENT))


def test_sorted_ids_made_later_sort_later_to_the_millisecond() -> None:
    moments = [MOMENT + timedelta(milliseconds=step) for step in (0, 1, 61, 62, 3_844, 10**9)]
    made = [ids.new_sorted_id("dlv", moment) for moment in moments]
    assert made == sorted(made)
    assert len({value[:12] for value in made}) == len(made)  # each its own time


def test_sorted_ids_of_one_millisecond_share_their_time_and_differ_in_the_rest() -> None:
    made = {ids.new_sorted_id("dlv", MOMENT) for _ in range(1000)}
    assert len(made) == 1000
    assert len({value[:12] for value in made}) == 1
    assert (
        ids.new_sorted_id("dlv", MOMENT + timedelta(microseconds=999 - 678))[:12]
        == next(iter(made))[:12]
    )
