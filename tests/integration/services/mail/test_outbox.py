"""The email outbox and its mailer against a real SMTP server on loopback: retried with
backoff while the server is down, sent once when it is back, leased so that no two takers
send one email together, given up after the last try; STARTTLS, TLS and a login."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from urllib.parse import quote

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.emails import Draft
from clubwire.services.mail import outbox
from clubwire.settings import Settings
from clubwire.storage.models import OutboxEmail
from clubwire.worker import mail
from tests.factories import EPOCH, FakeClock, make_club
from tests.mail_server import Mailbox, Security, smtp_server
from tests.ports import free_port
from tests.receiver import Authority, authority

LEASE = timedelta(seconds=60)
DRAFT = Draft("Webhook deliveries are failing: https://example.org/hooks", "Hello,\n")


def _mailing(settings: Settings, url: str, **more: object) -> Settings:
    """The settings with email on (validated, as at start-up)."""
    mailing = {"smtp_url": url, "mail_from": "hooks@granite.example", "attempt_timeout": 2.0}
    return Settings.model_validate({**settings.model_dump(), **mailing, **more})


def _queue(sessions: sessionmaker[Session], count: int = 1) -> list[str]:
    with sessions.begin() as session:
        club = make_club(session)
        recipients = [f"admin{n}@granite.example" for n in range(count)]
        outbox.enqueue(session, club.id, recipients, DRAFT, EPOCH)
    return _ids(sessions)


def _ids(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return list(session.scalars(select(OutboxEmail.id).order_by(OutboxEmail.id)))


def _row(sessions: sessionmaker[Session]) -> OutboxEmail:
    with sessions() as session:
        return session.scalars(select(OutboxEmail)).one()


def test_while_the_server_is_down_the_email_waits_and_is_sent_once_when_it_is_back(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    port = free_port()
    clock = FakeClock()
    mailer = mail.mailer_for(_mailing(settings, f"smtp://127.0.0.1:{port}"), sessions, clock)
    assert mailer is not None
    _queue(sessions)
    assert mailer.send_next() is False
    waiting = _row(sessions)
    assert (waiting.attempts, waiting.sent_at) == (1, None)
    assert waiting.next_attempt_at == EPOCH + timedelta(seconds=outbox.RETRY_DELAYS[0])
    assert "ConnectionRefusedError" in (waiting.last_error or "")
    mailbox = Mailbox()
    with smtp_server(mailbox, port):
        assert mailer.send_next() is False  # not due yet
        clock.advance(seconds=outbox.RETRY_DELAYS[0])
        assert mailer.send_next() is True
        sent_at = clock.now
        clock.advance(hours=1)
        assert mailer.send_next() is False
    (message,) = mailbox.messages
    assert message["Subject"] == DRAFT.subject
    sent = _row(sessions)
    assert (sent.sent_at, sent.next_attempt_at, sent.last_error) == (sent_at, None, None)


def test_a_taken_email_is_taken_again_only_when_its_lease_has_run_out(
    sessions: sessionmaker[Session],
) -> None:
    (email_id,) = _queue(sessions)
    first = outbox.take(sessions, EPOCH, LEASE)
    assert first is not None
    assert first.id == email_id
    assert outbox.take(sessions, EPOCH + LEASE - timedelta(seconds=1), LEASE) is None
    again = outbox.take(sessions, EPOCH + LEASE, LEASE)  # the first taker died
    assert again is not None
    assert (again.id, again.tries) == (email_id, 2)
    outbox.failed(sessions, first, "late", EPOCH + LEASE)  # the first taker's lease is gone
    assert _row(sessions).next_attempt_at == EPOCH + 2 * LEASE
    outbox.sent(sessions, again, EPOCH + LEASE)
    assert outbox.take(sessions, EPOCH + 10 * LEASE, LEASE) is None


def test_two_takers_at_once_never_take_the_same_email(sessions: sessionmaker[Session]) -> None:
    queued = _queue(sessions, 40)

    def drain() -> list[str]:
        taken = []
        while (email := outbox.take(sessions, EPOCH, LEASE)) is not None:
            taken.append(email.id)
        return taken

    with ThreadPoolExecutor(2) as pool:
        together = [pool.submit(drain) for _ in range(2)]
        taken = [email_id for future in together for email_id in future.result()]
    assert sorted(taken) == queued


def test_an_email_is_given_up_after_the_last_try(
    settings: Settings, sessions: sessionmaker[Session]
) -> None:
    clock = FakeClock()
    settings = _mailing(settings, f"smtp://127.0.0.1:{free_port()}")
    mailer = mail.mailer_for(settings, sessions, clock)
    assert mailer is not None
    _queue(sessions)
    for delay in outbox.RETRY_DELAYS:
        assert mailer.send_next() is False
        clock.advance(seconds=delay)
    assert mailer.send_next() is False
    given_up = _row(sessions)
    assert given_up.attempts == len(outbox.RETRY_DELAYS) + 1
    assert (given_up.next_attempt_at, given_up.sent_at) == (None, None)
    assert given_up.last_error is not None
    clock.advance(days=30)
    assert outbox.take(sessions, clock.now, LEASE) is None


@pytest.mark.parametrize("security", ["starttls", "tls"])
def test_starttls_or_tls_and_a_login(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: object, security: Security
) -> None:
    tls: Authority = authority(tmp_path)  # type: ignore[arg-type]
    password = "s3cret/with:odd@chars"
    mailbox = Mailbox(user="hooks@granite.example", password=password)
    with smtp_server(mailbox, security=security, tls=tls) as port:
        scheme = "smtps" if security == "tls" else "smtp"
        url = f"{scheme}://{quote(mailbox.user or '', safe='')}:{quote(password, safe='')}"
        mailing = _mailing(settings, f"{url}@localhost:{port}", ca_bundle=tls.bundle)
        mailer = mail.mailer_for(mailing, sessions, FakeClock())
        assert mailer is not None
        _queue(sessions)
        assert mailer.send_next() is True
    assert mailbox.logins == [("hooks@granite.example", password)]
    assert len(mailbox.messages) == 1


def test_a_wrong_password_is_a_failed_try_that_never_shows_it(
    settings: Settings, sessions: sessionmaker[Session], caplog: pytest.LogCaptureFixture
) -> None:
    mailbox = Mailbox(user="hooks", password="right-password")
    with smtp_server(mailbox) as port:
        url = f"smtp://hooks:wrong-password@127.0.0.1:{port}"
        mailer = mail.mailer_for(_mailing(settings, url), sessions, FakeClock())
        assert mailer is not None
        _queue(sessions)
        assert mailer.send_next() is False
    row = _row(sessions)
    assert ("hooks", "wrong-password") in mailbox.logins
    assert (row.attempts, row.sent_at) == (1, None)
    assert row.last_error
    assert "wrong-password" not in row.last_error
    assert "wrong-password" not in caplog.text
    assert mailbox.messages == []
