"""The attempt's log line leaves out what the receiver wrote (its ``Location``, a
``Retry-After`` that is not one), which may echo a member's name or email; the attempt stored
keeps it, for the club's staff, where an erasure can scrub it (issue 34)."""

from __future__ import annotations

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import logs
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Attempt
from tests.factories import EPOCH, make_club, receiver_settings, registration
from tests.functional.workers import attempt_once
from tests.logcapture import capturing
from tests.receiver import Authority, serving

ECHOED = "ann.o'neil@example.com"


@pytest.mark.parametrize(
    ("status", "header", "stored", "logged"),
    [
        (
            302,
            "Location",
            (f"redirect not followed (302 to /moved?{ECHOED})", None),
            (f"redirect not followed (302 to {logs.UNQUOTED})", None),
        ),
        (503, "Retry-After", (None, ECHOED), (None, logs.UNQUOTED)),
        (503, "Retry-After", (None, "120"), (None, "120")),
    ],
)
def test_the_line_says_the_receiver_answered_but_not_its_words(
    sessions: sessionmaker[Session],
    settings: Settings,
    tls: Authority,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    header: str,
    stored: tuple[str | None, str | None],
    logged: tuple[str | None, str | None],
) -> None:
    hooks = receiver_settings(settings, ca_bundle=tls.bundle, attempt_timeout=5.0)
    words = stored[1] or f"/moved?{ECHOED}"
    with serving(tls, status=status, answer_headers=[(header, words)]) as receiver:
        with sessions.begin() as session:
            club = make_club(session)
            endpoints.create_endpoint(
                session, club, receiver.url, ["registration.created"], EPOCH, hooks
            )
            events.publish(session, club, "registration.created", registration(), EPOCH)
        with capturing(monkeypatch, "info") as captured:
            attempt_once(sessions, hooks, EPOCH)
    (line,) = captured.events("attempt")
    with sessions() as session:
        attempt = session.scalars(select(Attempt)).one()
    assert (attempt.error, attempt.retry_after) == stored
    assert (line["response_code"], line["error"], line["retry_after"]) == (status, *logged)
