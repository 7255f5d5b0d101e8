"""Emails when an endpoint fails, end to end: a real worker, a real failing TLS receiver and a
real SMTP server on loopback (aiosmtpd), on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import timedelta
from urllib.parse import quote

import orjson
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.services.mail import notifications
from clubwire.settings import Settings
from clubwire.storage.models import Club, Endpoint, Event, OutboxEmail, User
from clubwire.worker import running
from tests.factories import EPOCH, PASSWORD, make_club, make_staff, registration
from tests.functional.ui_pages import browser
from tests.functional.workers import delivery_statuses, publish_registrations
from tests.mail_server import Mailbox, smtp_server
from tests.receiver import Authority, serving

SMTP_PASSWORD = "p@ss:w/rd %secret"  # percent-encoded in the URL
SENDER = "Granite hooks <hooks@granite.example>"
ADMINS = ("ann@granite.example", "bob@granite.example")
OPTED_OUT = "cat@granite.example"
RECEIVER_TOKEN = "tok3n-in-the-query"
PUBLIC_URL = "https://hooks.granite.example"


def _hooks(settings: Settings, tls: Authority, port: int | None) -> Settings:
    mail: dict[str, object] = {}
    if port is not None:
        mail = {
            "smtp_url": f"smtp://clubwire:{quote(SMTP_PASSWORD, safe='')}@127.0.0.1:{port}",
            "mail_from": SENDER,
        }
    return Settings.model_validate(
        {
            **settings.model_dump(),
            "allow_private_targets": True,
            "ca_bundle": tls.bundle,
            "retry_schedule": (0, 0, 0, 0, 0),
            "attempt_timeout": 2.0,
            "connect_timeout": 1.0,
            "lease_seconds": 30.0,
            "public_url": PUBLIC_URL,
            **mail,
        }
    )


def _mailbox() -> Mailbox:
    return Mailbox(user="clubwire", password=SMTP_PASSWORD)


def _payload_texts(sessions: sessionmaker[Session]) -> list[str]:
    """Every text value of the events sent: none of it may reach an email."""
    found: list[str] = []

    def walk(value: object) -> None:
        if isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, str) and len(value) > 3:
            found.append(value)

    with sessions() as session:
        for body in session.scalars(select(Event.body)):
            walk(orjson.loads(body)["data"])
    return found


def _club_with_admins(sessions: sessionmaker[Session]) -> None:
    with sessions.begin() as session:
        make_club(session, "granite")
        make_club(session, "basalt")
    for email in (*ADMINS, OPTED_OUT):
        make_staff(sessions, email, clubs=["granite"])
    make_staff(sessions, "dan@basalt.example", clubs=["basalt"])
    make_staff(sessions, "sue@platform.example", superadmin=True)
    with sessions.begin() as session:
        cat = session.scalars(select(User).where(User.email == OPTED_OUT)).one()
        club = session.scalars(select(Club).where(Club.slug == "granite")).one()
        notifications.set_wants_emails(session, cat.id, club.id, False)


def _endpoint(sessions: sessionmaker[Session], hooks: Settings, url: str) -> tuple[str, str]:
    with sessions.begin() as session:
        club = session.scalars(select(Club).where(Club.slug == "granite")).one()
        endpoint, secret = endpoints.create_endpoint(
            session, club, url, ["registration.created"], EPOCH, hooks
        )
        return endpoint.id, secret


def _publish(sessions: sessionmaker[Session], count: int) -> None:
    with sessions.begin() as session:
        club = session.scalars(select(Club).where(Club.slug == "granite")).one()
        for _ in range(count):
            events.publish(session, club, "registration.created", registration(), EPOCH)


def _endpoint_row(sessions: sessionmaker[Session], endpoint_id: str) -> Endpoint:
    with sessions() as session:
        return session.get_one(Endpoint, endpoint_id)


def _outbox_count(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(OutboxEmail)) or 0


def _work_until(
    hooks: Settings, sessions: sessionmaker[Session], done: Callable[[], bool], linger: float = 0
) -> None:
    """Run a worker until ``done()`` holds, then ``linger`` seconds more."""

    async def run() -> None:
        async with running.running(hooks, sessions):
            deadline = time.monotonic() + 30
            while not await asyncio.to_thread(done):
                assert time.monotonic() < deadline, "the worker did not get there in time"
                await asyncio.sleep(0.05)
            await asyncio.sleep(linger)

    asyncio.run(run())


def test_admins_get_one_email_at_three_dead_and_one_at_switch_off(
    settings: Settings, sessions: sessionmaker[Session], tls: Authority
) -> None:
    mailbox = _mailbox()
    _club_with_admins(sessions)
    with smtp_server(mailbox) as port, serving(tls, status=503) as failing:
        hooks = _hooks(settings, tls, port)
        endpoint_id, secret = _endpoint(sessions, hooks, f"{failing.url}?token={RECEIVER_TOKEN}")
        _publish(sessions, 3)
        _work_until(
            hooks,
            sessions,
            lambda: (
                _endpoint_row(sessions, endpoint_id).dead_in_a_row == 3
                and len(mailbox.messages) >= 2
            ),
        )
        _publish(sessions, 2)
        _work_until(hooks, sessions, lambda: len(mailbox.messages) >= 4, linger=1.5)
    assert not _endpoint_row(sessions, endpoint_id).enabled
    assert _endpoint_row(sessions, endpoint_id).disabled_reason == "dead_in_a_row"
    assert sorted(m["To"] for m in mailbox.messages) == sorted(ADMINS * 2)
    assert set(mailbox.logins) == {("clubwire", SMTP_PASSWORD)}
    link = f"{PUBLIC_URL}/settings/granite/webhooks#endpoint-{endpoint_id}"
    payload = _payload_texts(sessions)
    assert "Sarah Thompson" in payload
    for admin in ADMINS:
        warning, switched_off = mailbox.to(admin)
        assert "failing" in warning["Subject"]
        assert "switched off" in switched_off["Subject"]
        assert "2 more deliveries fail in a row" in warning.get_content()
        assert "switch the endpoint back on" in switched_off.get_content()
        for message in (warning, switched_off):
            body = message.get_content()
            assert message["From"] == SENDER
            assert message["Auto-Submitted"] == "auto-generated"
            assert message["Message-ID"].endswith("@granite.example>")
            assert link in body
            assert "Last answer from the receiver: HTTP 503" in body
            assert failing.url in body
            for secret_text in (secret, RECEIVER_TOKEN, SMTP_PASSWORD, *payload):
                assert secret_text not in str(message)


def test_a_410_switches_the_endpoint_off_at_once_with_one_email_that_says_so(
    settings: Settings, sessions: sessionmaker[Session], tls: Authority
) -> None:
    mailbox = _mailbox()
    _club_with_admins(sessions)
    with smtp_server(mailbox) as port, serving(tls, status=410) as gone:
        hooks = _hooks(settings, tls, port)
        endpoint_id, _ = _endpoint(sessions, hooks, gone.url)
        tomorrow = timestamps.utc_now() + timedelta(days=1)
        publish_registrations(sessions, at=tomorrow)  # still waiting at the switch-off
        _publish(sessions, 1)
        _work_until(hooks, sessions, lambda: len(mailbox.messages) >= 2, linger=1.5)
    assert len(gone.received) == 1
    assert sorted(delivery_statuses(sessions)) == [("dead", 1), ("skipped", 0)]
    endpoint = _endpoint_row(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.dead_in_a_row) == (
        False,
        "gone",
        1,
    )
    assert sorted(m["To"] for m in mailbox.messages) == sorted(ADMINS)
    for message in mailbox.messages:
        body = message.get_content()
        assert message["Subject"] == f"Webhook endpoint switched off: {gone.url}"
        assert "because its receiver answered 410 Gone" in body
        assert "Last answer from the receiver: HTTP 410" in body
        assert "in a row" not in body
    with sessions.begin() as session:
        endpoints.enable_endpoint(session, endpoint.club_id, endpoint_id, EPOCH)
    endpoint = _endpoint_row(sessions, endpoint_id)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.dead_in_a_row) == (True, None, 0)


def test_a_recovery_arms_the_warning_again(
    settings: Settings, sessions: sessionmaker[Session], tls: Authority
) -> None:
    mailbox = _mailbox()
    _club_with_admins(sessions)
    with smtp_server(mailbox) as port, serving(tls, status=503) as receiver:
        hooks = _hooks(settings, tls, port)
        endpoint_id, _ = _endpoint(sessions, hooks, receiver.url)
        _publish(sessions, 4)

        def dead(count: int) -> Callable[[], bool]:
            return lambda: _endpoint_row(sessions, endpoint_id).dead_in_a_row == count

        _work_until(hooks, sessions, lambda: dead(4)() and len(mailbox.messages) >= 2)
        receiver.status = 200
        _publish(sessions, 1)
        _work_until(hooks, sessions, dead(0))
        receiver.status = 500
        _publish(sessions, 3)
        _work_until(hooks, sessions, lambda: len(mailbox.messages) >= 4, linger=1.0)
    assert len(mailbox.messages) == 4
    assert all("failing" in m["Subject"] for m in mailbox.messages)
    assert "HTTP 500" in mailbox.messages[-1].get_content()
    assert _endpoint_row(sessions, endpoint_id).enabled


def test_without_smtp_settings_nothing_is_queued_and_the_page_says_email_is_off(
    settings: Settings, sessions: sessionmaker[Session], tls: Authority
) -> None:
    _club_with_admins(sessions)
    with serving(tls, status=503) as failing:
        hooks = _hooks(settings, tls, None)
        endpoint_id, _ = _endpoint(sessions, hooks, failing.url)
        _publish(sessions, 5)
        _work_until(hooks, sessions, lambda: not _endpoint_row(sessions, endpoint_id).enabled)
    assert _outbox_count(sessions) == 0
    with browser(hooks, base_url=PUBLIC_URL) as staff:
        staff.sign_in(ADMINS[0], PASSWORD)
        page = staff.get("/settings/granite/webhooks").text
    assert "Email is off" in page
    assert "Stop emailing me" not in page


def test_each_admin_turns_the_emails_off_and_on_for_themselves(
    settings: Settings, sessions: sessionmaker[Session], tls: Authority
) -> None:
    _club_with_admins(sessions)
    hooks = _hooks(settings, tls, 2525)
    with browser(hooks, base_url=PUBLIC_URL) as staff:
        staff.sign_in(ADMINS[0], PASSWORD)
        assert "You get these emails." in staff.get("/settings/granite/webhooks").text
        answer = staff.post("/settings/granite/failure-emails", {"wanted": "no"})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/settings/granite/webhooks#failure-emails"
        assert "You do not get these emails." in staff.get("/settings/granite/webhooks").text
        refused = staff.post("/settings/granite/failure-emails", {"wanted": "yes"}, token="x")
        assert refused.status_code == 403
        for hostile in ("maybe", "yes\x00", "\u202eyes", "y" * 100_000):
            answer = staff.post("/settings/granite/failure-emails", {"wanted": hostile})
            assert answer.status_code == 422, hostile
            assert "Form not understood" in answer.text
    with sessions() as session:
        club = session.scalars(select(Club).where(Club.slug == "granite")).one()
        assert notifications.recipients(session, club.id) == [ADMINS[1]]
    with browser(hooks, base_url=PUBLIC_URL) as staff:
        staff.sign_in("sue@platform.example", PASSWORD)
        page = staff.get("/settings/granite/webhooks").text
        assert "You are not an admin of this club" in page
        answer = staff.post("/settings/granite/failure-emails", {"wanted": "no"})
        assert answer.status_code == 403
