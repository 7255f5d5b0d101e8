"""A batch's shape: 1–100 events, and idempotency keys taken exactly as documented (the
pattern of the OpenAPI document, which is a header's)."""

from __future__ import annotations

import jsonschema_rs
import pydantic
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain.event_batches import BatchEvent, EventBatch

KEY_SCHEMA = BatchEvent.model_json_schema()["properties"]["idempotencyKey"]
DOCUMENTED = jsonschema_rs.validator_for(KEY_SCHEMA)


def _taken(key: str) -> bool:
    try:
        BatchEvent.model_validate({"event": "x", "data": {}, "idempotencyKey": key})
    except pydantic.ValidationError:
        return False
    return True


@given(st.text(max_size=300) | st.text(st.characters(max_codepoint=0x17F), max_size=8))
def test_a_key_is_taken_exactly_when_the_document_allows_it(key: str) -> None:
    assert _taken(key) == DOCUMENTED.is_valid(key)


@pytest.mark.parametrize(
    ("key", "taken"),
    [
        *[("order-1234", True), (" a b ", True), ("é", True), ("", False), (" ", False)],
        *[("\x00", False), ("\x85", False), ("a\xa0", False), ("日", False), ("k" * 256, False)],
    ],
)
def test_keys_a_header_could_carry_are_taken(key: str, taken: bool) -> None:
    assert _taken(key) is taken


ONE = {"event": "registration.created", "data": {}}


@pytest.mark.parametrize("count", [1, 100])
def test_a_batch_has_one_to_a_hundred_events(count: int) -> None:
    assert len(EventBatch.model_validate({"events": [ONE] * count}).events) == count


@pytest.mark.parametrize("count", [0, 101])
def test_none_or_more_than_a_hundred_are_refused_as_the_events(count: int) -> None:
    with pytest.raises(pydantic.ValidationError) as refused:
        EventBatch.model_validate({"events": [ONE] * count})
    assert [error["loc"] for error in refused.value.errors()] == [("events",)]
