"""Nothing a receiver answers stops recording: its delivery is recorded and retried (or dead)
as the schedule says, and other clubs' deliveries arrive exactly once meanwhile.

A real worker on SQLite and PostgreSQL, at every log level, sends to raw TLS receivers
that answer what aiohttp's own server would refuse to send.
"""

from __future__ import annotations

import asyncio
import contextlib
import re

import pytest
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from clubwire import logs
from clubwire.domain import text
from clubwire.services.delivery import records
from clubwire.settings import Settings
from tests import triggers
from tests.functional.services.delivery.outbound import delivering
from tests.functional.services.delivery.outbound.harness import Receiver, Tls, answering, response
from tests.logcapture import capturing

LONG_LOCATION = "/" + "a" * 1999
# Raw bytes in a header (and in the body), as no HTTP library would send them.
UNDECODABLE = b"HTTP/1.1 302 Found\r\nLocation: /\xff\xfe\r\nContent-Length: 4\r\n\r\n\x00\xff\x1bz"
LONG_HEADER = response(200, b"", "X-Padding: " + "p" * 64 * 1024)

# What each hostile receiver's attempts are recorded with: (error, excerpt).
EXPECTED = {
    "long location": (
        f"redirect not followed (302 to {text.cleaned(LONG_LOCATION, 160)})",
        "",
    ),
    "undecodable header": ("redirect not followed (302 to /\\xff\\xfe)", "\\x00\ufffd\\x1bz"),
    "64 KiB header": ("invalid http response", ""),
}

# What their log lines say: never a receiver's words (its Location), which could echo a member.
LOGGED = {f"redirect not followed (302 to {logs.UNQUOTED})", "invalid http response"}

HANDLERS = {
    "long location": answering(302, b"", f"Location: {LONG_LOCATION}"),
    "undecodable header": delivering.raw(UNDECODABLE),
    "64 KiB header": delivering.raw(LONG_HEADER),
}


@pytest.mark.parametrize("level", list(logs.LEVELS))
def test_hostile_answers_are_recorded_and_hold_up_no_one(
    level: logs.Level,
    sessions: sessionmaker[Session],
    settings: Settings,
    tls: Tls,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hooks = delivering.worker_settings(settings, tls)
    endpoints: dict[str, str] = {}  # by receiver: its endpoint's id

    async def scenario() -> dict[str, Receiver]:
        async with contextlib.AsyncExitStack() as stack:
            receivers = {
                name: await stack.enter_async_context(Receiver(handler, tls.server))
                for name, handler in {"healthy": answering(200, b"ok"), **HANDLERS}.items()
            }
            for name, receiver in receivers.items():
                club = "granite" if name == "healthy" else "hostile"
                endpoints[name] = delivering.endpoint(sessions, hooks, receiver.url(), club)
            delivering.publish(sessions, "hostile")
            delivering.publish(sessions, "granite", 12)
            await delivering.deliver_until(hooks, sessions, lambda: _done(sessions, endpoints))
        return receivers

    with capturing(monkeypatch, level) as captured:
        receivers = asyncio.run(scenario())

    healthy = delivering.deliveries(sessions, endpoints["healthy"])
    assert delivering.hits(receivers["healthy"]) == {d.id: 1 for d in healthy}
    assert [(d.status, d.attempt) for d in healthy] == [("succeeded", 1)] * 12
    for name in HANDLERS:
        (delivery,) = delivering.deliveries(sessions, endpoints[name])
        assert (delivery.status, delivery.attempt) == ("dead", 2)  # schedule (0,): one retry
        assert delivering.hits(receivers[name]) == {delivery.id: 2}
        stored = [(a.error, a.excerpt) for a in delivering.attempts(sessions, delivery.id)]
        assert stored == [EXPECTED[name]] * 2, name
        assert all(len(error or "") <= records.ERROR_LIMIT for error, _ in stored)
    attempt_lines = captured.events("attempt")  # every line of the run parsed as JSON
    if logs.LEVELS[level] <= logs.LEVELS["info"]:
        assert len(attempt_lines) == 12 + 2 * len(HANDLERS)
        assert {line["error"] for line in attempt_lines} - {None} == LOGGED
    else:
        assert attempt_lines == []


def _done(sessions: sessionmaker[Session], endpoints: dict[str, str]) -> bool:
    """The healthy endpoint's deliveries succeeded, the others' are dead."""
    return all(
        delivering.settled(sessions, endpoint_id, "succeeded" if name == "healthy" else "dead")
        for name, endpoint_id in endpoints.items()
    )


def test_an_answer_the_database_refuses_is_recorded_as_a_failure(
    engine: Engine,
    sessions: sessionmaker[Session],
    settings: Settings,
    tls: Tls,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    triggers.refuse_attempts(engine, "NEW.excerpt = 'poison'")
    hooks = delivering.worker_settings(settings, tls)
    endpoints: dict[str, str] = {}

    async def scenario() -> tuple[Receiver, Receiver]:
        async with (
            Receiver(answering(200, b"poison"), tls.server) as refused,
            Receiver(answering(200, b"ok"), tls.server) as healthy,
        ):
            endpoints["refused"] = delivering.endpoint(sessions, hooks, refused.url(), "hostile")
            endpoints["healthy"] = delivering.endpoint(sessions, hooks, healthy.url(), "granite")
            delivering.publish(sessions, "hostile")
            delivering.publish(sessions, "granite", 12)
            await delivering.deliver_until(hooks, sessions, lambda: _done(sessions, endpoints))
        return refused, healthy

    with capturing(monkeypatch, "info") as captured:
        refused, healthy = asyncio.run(scenario())

    healthy_deliveries = delivering.deliveries(sessions, endpoints["healthy"])
    assert delivering.hits(healthy) == {d.id: 1 for d in healthy_deliveries}
    (delivery,) = delivering.deliveries(sessions, endpoints["refused"])
    assert (delivery.status, delivery.attempt) == ("dead", 2)
    assert delivering.hits(refused) == {delivery.id: 2}
    stored = [
        (a.response_code, a.error, a.excerpt) for a in delivering.attempts(sessions, delivery.id)
    ]
    assert stored == [(None, records.UNRECORDABLE, "")] * 2
    told = [line for line in captured.lines() if "could not be recorded" in line.get("message", "")]
    assert [line["level"] for line in told] == ["warning"] * 2  # once for each attempt
    for line in told:  # by ids and kinds of error: nothing the receiver said
        assert re.fullmatch(
            f"the attempt of {delivery.id} could not be recorded as it was \\(\\w+Error\\); "
            "recorded as failed",
            line["message"],
        )
