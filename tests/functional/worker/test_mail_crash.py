"""The email outbox survives a SIGKILL: a real ``clubwire worker`` process is killed while
the SMTP server is taking an email from it; the next worker sends every email, the one in
flight perhaps twice (at least once), none lost."""

from __future__ import annotations

import signal
from collections import Counter
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import OutboxEmail
from tests.factories import make_club, make_staff, registration
from tests.functional.workers import Workers, worker_environment
from tests.mail_server import Mailbox, smtp_server
from tests.receiver import authority, serving

pytestmark = pytest.mark.slow

ADMINS = ("ann@granite.example", "bob@granite.example")


def _failing_endpoint(sessions: sessionmaker[Session], settings: Settings, url: str) -> None:
    """A club with two admins and an endpoint with three deliveries that will all die."""
    hooks = settings.model_copy(update={"allow_private_targets": True})
    now = timestamps.utc_now()
    with sessions.begin() as session:
        club = make_club(session)
        endpoints.create_endpoint(session, club, url, ["registration.created"], now, hooks)
        for _ in range(3):
            events.publish(session, club, "registration.created", registration(), now)
    for email in ADMINS:
        make_staff(sessions, email, clubs=["granite"])


def _outbox(sessions: sessionmaker[Session]) -> list[OutboxEmail]:
    with sessions() as session:
        return list(session.scalars(select(OutboxEmail)))


def test_a_worker_killed_while_sending_an_email_loses_none(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    tls = authority(tmp_path)
    mailbox = Mailbox()
    with smtp_server(mailbox) as port, serving(tls, status=503) as failing:
        env = worker_environment(
            settings.database_url,
            tls.bundle,
            CLUBWIRE_SMTP_URL=f"smtp://127.0.0.1:{port}",
            CLUBWIRE_MAIL_FROM="hooks@granite.example",
        )
        _failing_endpoint(sessions, settings, failing.url)
        with Workers(tmp_path, env) as workers:
            first = workers.start()

            def kill_once() -> None:
                mailbox.before_accepting = None
                workers.kill(first)

            mailbox.before_accepting = kill_once
            workers.until(lambda: first.poll() is not None, "the worker killed mid-send")
            assert first.wait(timeout=10) == -signal.SIGKILL
            at_kill = _outbox(sessions)
            assert len(at_kill) == len(ADMINS)
            assert [row.sent_at for row in at_kill] == [None, None]
            workers.start()
            workers.until(
                lambda: all(row.sent_at for row in _outbox(sessions)), "every email sent", 30
            )
            assert "Traceback" not in workers.outputs(), workers.outputs()
    arrived = Counter(message["To"] for message in mailbox.messages)
    assert set(arrived) == set(ADMINS)
    assert sum(arrived.values()) <= len(ADMINS) + 1  # the one in flight, perhaps twice
