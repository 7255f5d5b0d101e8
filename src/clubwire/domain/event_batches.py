"""A batch of events to publish in one transaction, as the internal API and ``clubwire event
publish-batch`` take it: up to ``MAX_EVENTS`` events, each with its kind, data and, if the
platform gives one, its idempotency key."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

MAX_EVENTS = 100
MAX_IDEMPOTENCY_KEY = 255

# An idempotency key as a header carries it (Latin-1 text): printable characters (not C0 or
# C1 controls, DEL, no-break or soft hyphen), at least one of them not a space, since HTTP
# trims spaces from both ends of a header's value. A batch's keys are held to the same, so a
# key works alike in either request.
_VISIBLE = r"\x21-\x7e\xa1-\xac\xae-\xff"
IDEMPOTENCY_KEY_PATTERN = f"^[ {_VISIBLE}]*[{_VISIBLE}][ {_VISIBLE}]*$"
_KEY = re.compile(IDEMPOTENCY_KEY_PATTERN)


def _key_as_a_header_carries_it(key: str) -> str:
    if not _KEY.fullmatch(key):
        raise ValueError(
            "an idempotency key has printable Latin-1 characters (as a header carries "
            "them), not only spaces"
        )
    return key


IdempotencyKey = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_IDEMPOTENCY_KEY,
        json_schema_extra={"pattern": IDEMPOTENCY_KEY_PATTERN},
    ),
    AfterValidator(_key_as_a_header_carries_it),
]


class BatchEvent(BaseModel):
    """One event of a batch: what a single publish takes in its body and its
    ``Idempotency-Key`` header, in one object."""

    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_name=True)
    event: Annotated[str, Field(examples=["registration.created"], description="The event kind.")]
    data: Annotated[
        dict[str, Any], Field(description="The payload; its shape depends on the kind.")
    ]
    idempotency_key: Annotated[
        IdempotencyKey | None,
        Field(
            examples=["order-1234"],
            description="Your id for this event (per club), as the single publish's "
            "Idempotency-Key header: one already used with the same event and data "
            "answers the first event's id and creates nothing; with other data the "
            "batch is refused (409). Twice in one batch: the second is a repeat of the "
            "first.",
        ),
    ] = None


class EventBatch(BaseModel):
    """Events to publish together: all of them or, if one is refused, none."""

    model_config = ConfigDict(extra="forbid")
    events: Annotated[
        list[BatchEvent],
        Field(
            min_length=1,
            max_length=MAX_EVENTS,
            description=f"1–{MAX_EVENTS} events, published in this order.",
        ),
    ]
