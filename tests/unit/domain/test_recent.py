"""``Recent`` keeps the entries used most recently, at most its size, as an LRU cache does."""

from __future__ import annotations

from collections import OrderedDict

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain.recent import Recent


def test_the_least_recently_used_is_forgotten_first() -> None:
    kept: Recent[str, int] = Recent(2)
    kept.keep("a", 1)
    kept.keep("b", 2)
    assert kept.get("a") == 1  # a is now the most recent
    kept.keep("c", 3)
    assert ("a" in kept, "b" in kept, "c" in kept) == (True, False, True)
    assert kept.get("b") is None
    assert len(kept) == 2


def test_keeping_again_replaces_and_refreshes() -> None:
    kept: Recent[str, int] = Recent(2)
    kept.keep("a", 1)
    kept.keep("b", 2)
    kept.keep("a", 10)
    kept.keep("c", 3)
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (10, None, 3)


def test_a_size_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one entry"):
        Recent(0)


_OPERATIONS = st.lists(st.tuples(st.booleans(), st.integers(0, 9), st.integers()), max_size=200)


@given(st.integers(1, 5), _OPERATIONS)
def test_it_keeps_what_an_lru_cache_keeps(
    size: int, operations: list[tuple[bool, int, int]]
) -> None:
    kept: Recent[int, int] = Recent(size)
    model: OrderedDict[int, int] = OrderedDict()
    for keeping, key, value in operations:
        if keeping:
            kept.keep(key, value)
            model[key] = value
            model.move_to_end(key)
            if len(model) > size:
                model.popitem(last=False)
        else:
            assert kept.get(key) == model.get(key)
            if key in model:
                model.move_to_end(key)
        assert len(kept) == len(model) <= size
    assert all(kept.get(key) == value for key, value in reversed(list(model.items())))
