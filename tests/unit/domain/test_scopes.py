"""Unit tests for API key scopes: normalising a choice and storing it."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import scopes

known_scope = st.sampled_from(scopes.ALL)


def test_the_catalogue_has_the_four_documented_scopes() -> None:
    assert scopes.ALL == ("read:programs", "read:members", "read:invoices", "read:games")
    assert scopes.READ_PROGRAMS == "read:programs"


@pytest.mark.parametrize("scope", scopes.ALL)
def test_normalise_accepts_each_known_scope(scope: str) -> None:
    assert scopes.normalise([scope]) == (scope,)


def test_normalise_removes_duplicates() -> None:
    assert scopes.normalise(["read:games", "read:games", "read:programs", "read:games"]) == (
        "read:programs",
        "read:games",
    )


def test_normalise_returns_catalogue_order() -> None:
    assert scopes.normalise(reversed(scopes.ALL)) == scopes.ALL


def test_normalise_accepts_any_iterable() -> None:
    assert scopes.normalise(s for s in ["read:members"]) == ("read:members",)


def test_normalise_rejects_an_unknown_scope_and_names_it() -> None:
    with pytest.raises(scopes.UnknownScope, match="write:programs"):
        scopes.normalise(["write:programs"])


def test_normalise_names_every_unknown_scope() -> None:
    with pytest.raises(scopes.UnknownScope) as caught:
        scopes.normalise(["read:programs", "write:programs", "admin"])
    assert "write:programs" in str(caught.value)
    assert "admin" in str(caught.value)


@pytest.mark.parametrize(
    "scope", ["READ:PROGRAMS", "read:programs ", " read:programs", "read:program", "read programs"]
)
def test_normalise_rejects_near_misses(scope: str) -> None:
    with pytest.raises(scopes.UnknownScope):
        scopes.normalise([scope])


def test_unknown_scope_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="admin"):
        scopes.normalise(["admin"])


def test_normalise_rejects_the_empty_choice() -> None:
    with pytest.raises(scopes.UnknownScope, match="at least one"):
        scopes.normalise([])


@given(st.lists(known_scope, min_size=1))
def test_normalise_keeps_each_chosen_scope_once_in_catalogue_order(chosen: list[str]) -> None:
    result = scopes.normalise(chosen)
    assert set(result) == set(chosen)
    assert len(result) == len(set(result))
    assert list(result) == sorted(result, key=scopes.ALL.index)


@given(st.lists(known_scope, min_size=1))
def test_normalise_is_idempotent(chosen: list[str]) -> None:
    once = scopes.normalise(chosen)
    assert scopes.normalise(once) == once


def test_encode_joins_with_single_spaces() -> None:
    assert scopes.encode(("read:programs", "read:games")) == "read:programs read:games"


@given(st.sets(known_scope, min_size=1))
def test_encode_then_decode_round_trips_a_normalised_choice(chosen: set[str]) -> None:
    normalised = scopes.normalise(chosen)
    assert scopes.decode(scopes.encode(normalised)) == normalised


@given(st.lists(known_scope, unique=True))
def test_encode_then_decode_round_trips_any_subset(chosen: list[str]) -> None:
    assert scopes.decode(scopes.encode(chosen)) == tuple(chosen)
