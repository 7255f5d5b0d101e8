"""Unit tests for prefixed random identifiers."""

from __future__ import annotations

import re

import pytest

from clubwire import ids


def test_new_id_is_the_prefix_an_underscore_and_20_base62_characters() -> None:
    assert re.fullmatch(r"org_[0-9A-Za-z]{20}", ids.new_id("org"))


def test_new_ids_are_distinct() -> None:
    assert len({ids.new_id("org") for _ in range(1000)}) == 1000


def test_the_base62_alphabet_is_digits_and_ascii_letters() -> None:
    assert len(ids.BASE62) == 62
    assert set(ids.BASE62) == set("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


@pytest.mark.parametrize("length", [0, 1, 10, 32, 100])
def test_random_base62_has_the_asked_length_and_alphabet(length: int) -> None:
    value = ids.random_base62(length)
    assert len(value) == length
    assert set(value) <= set(ids.BASE62)


def test_random_base62_uses_the_whole_alphabet() -> None:
    assert set(ids.random_base62(5000)) == set(ids.BASE62)
