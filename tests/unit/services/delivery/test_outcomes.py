"""An attempt's outcome: in a word (metrics and logs), from the delivery's verdict; and its
texts, made safe to store and show where they enter."""

from __future__ import annotations

import asyncio

import pytest

from clubwire.domain import delivering, text
from clubwire.domain.delivering import Job, Outcome, RetrySchedule, Status, Trigger
from clubwire.services.delivery import outbound, records
from clubwire.storage import tables
from tests.factories import EPOCH
from tests.resolvers import StubResolver

SCHEDULE = RetrySchedule((60, 300))


@pytest.mark.parametrize(
    ("status", "trigger", "attempts_made", "ok", "expected"),
    [
        (Status.PENDING, Trigger.SCHEDULED, 1, True, Outcome.SUCCEEDED),
        (Status.PENDING, Trigger.SCHEDULED, 1, False, Outcome.RETRYING),
        (Status.PENDING, Trigger.SCHEDULED, 3, False, Outcome.DEAD),
        (Status.PENDING, Trigger.MANUAL, 2, False, Outcome.RETRYING),
        (Status.DEAD, Trigger.MANUAL, 4, False, Outcome.FAILED),
        (Status.DEAD, Trigger.MANUAL, 4, True, Outcome.SUCCEEDED),
        (Status.PENDING, Trigger.TEST, 1, False, Outcome.FAILED),
        (Status.PENDING, Trigger.TEST, 1, True, Outcome.SUCCEEDED),
    ],
)
def test_the_outcome_follows_the_verdict(
    status: Status, trigger: Trigger, attempts_made: int, ok: bool, expected: Outcome
) -> None:
    made_before = attempts_made - 1  # ``attempts_made`` counts the attempt being judged
    job = Job("dlv_1", "org_a", "we_a", "ping", "", "", b"{}", status, made_before, trigger, EPOCH)
    verdict = delivering.judge(job, ok, EPOCH, SCHEDULE, 0.5)
    assert delivering.outcome(verdict, ok) is expected


# -- the texts of an outcome, safe where they enter (services.delivery.outbound) ------------------


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"ok":true}', '{"ok":true}'),
        (b"ok\x00\x1b[31m\r\n\tdone", "ok\\x00\\x1b[31m\\x0d\n\tdone"),
        (b"bad \xff\xfe bytes", "bad \ufffd\ufffd bytes"),
        ("left \u202e right".encode(), "left \\u202e right"),
        ("é".encode() * 3000, "é" * 1000),  # the first 1000 characters, as they were
    ],
)
def test_an_excerpt_is_safe_text(body: bytes, expected: str) -> None:
    assert outbound.excerpt(body) == expected


def test_an_excerpt_that_escapes_lengthen_is_cut_to_its_limit() -> None:
    excerpt = outbound.excerpt(b"\x00" * 5000)
    assert len(excerpt) == records.EXCERPT_LIMIT
    assert excerpt.startswith("\\x00\\x00")
    assert excerpt.endswith(text.ELLIPSIS)


def test_the_error_limit_is_the_size_of_its_column() -> None:
    assert tables.attempts.c.error.type.length == records.ERROR_LIMIT  # type: ignore[attr-defined]


def test_a_blocked_name_of_any_length_fits_its_column() -> None:
    resolver = outbound.PublicResolver(StubResolver(["10.0.0.1"]))
    host = "a" * 300 + ".example"

    with pytest.raises(outbound.Blocked) as blocked:
        asyncio.run(resolver.resolve(host))

    message = str(blocked.value)
    assert len(message) <= records.ERROR_LIMIT
    assert message == f"blocked: {'a' * 149}{text.ELLIPSIS} resolves only to non-public addresses"
