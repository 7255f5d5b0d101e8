"""Nothing personal in logs (issue 34, DESIGN §9): real ``clubwire serve`` (and, on
PostgreSQL, ``clubwire worker``) processes at their most talkative level publish events of
a member whose name and email are unique strings, deliver them to receivers that echo them
back in every way a receiver can (a body, a ``Location``, a ``Retry-After``), fail until
deliveries die and failure emails go out through a real SMTP server, then erase the member;
and no line any process wrote, nor any email sent, holds the name or the email, in any
spelling."""

from __future__ import annotations

import random
import re
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog, personal_data, timestamps
from clubwire.services import endpoints
from clubwire.settings import Settings
from clubwire.storage.models import Delivery
from tests.conftest import PLATFORM_TOKEN
from tests.factories import EPOCH, make_club, make_staff
from tests.functional.processes import wait_for
from tests.functional.workers import Workers, worker_environment
from tests.mail_server import Mailbox, smtp_server
from tests.ports import free_port
from tests.receiver import Authority, Receiver, serving

pytestmark = pytest.mark.slow

KINDS = ("registration.created", "member.updated", "practice_ice.booked")
ADMIN = "admin@granite.example"
FAILING = 4  # the receivers that never take a delivery: each earns its club's admin an email
AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}


class Member:
    """A member whose name and email are found nowhere else: non-ASCII, a quote and a
    backslash in both, so that their JSON-escaped and URL-encoded spellings differ."""

    def __init__(self) -> None:
        self.token = secrets.token_hex(6)
        self.name = f'Zoë "Ƶ" O\'Brien\\{self.token}'
        self.email = f'zoë"{self.token}\\x@bücher.example'

    def data(self, kind: str, **overrides: object) -> dict[str, Any]:
        data: dict[str, Any] = event_catalog.sample(kind, EPOCH, random.Random(kind))
        data["member"] = {**data["member"], "name": self.name, "email": self.email}
        return data | overrides

    def pattern(self) -> re.Pattern[str] | None:
        return personal_data.pattern(personal_data.spellings([self.name, self.email, self.token]))


@pytest.fixture
def receivers(tls: Authority, member: Member) -> Iterator[list[Receiver]]:
    """Receivers that echo what they were sent every way they can: (a) the body with 200,
    (b) the body with 500, (c) a 302 to a ``Location`` holding the email, (d) a 503 with a
    ``Retry-After`` holding it."""
    location = f"https://127.0.0.1/moved?email={quote(member.email)}&raw={member.email}"
    with ExitStack() as stack:
        yield [
            stack.enter_context(serving(tls, echo=True)),
            stack.enter_context(serving(tls, status=500, echo=True)),
            stack.enter_context(serving(tls, status=302, answer_headers=[("Location", location)])),
            stack.enter_context(
                serving(tls, status=503, answer_headers=[("Retry-After", member.email)])
            ),
        ]


@pytest.fixture
def member() -> Member:
    return Member()


def _club(sessions: sessionmaker[Session], settings: Settings, urls: list[str]) -> None:
    """granite, with an admin who gets failure emails and an endpoint per receiver."""
    local = settings.model_copy(update={"allow_private_targets": True})
    with sessions.begin() as session:
        club = make_club(session)
        for url in urls:
            endpoints.create_endpoint(session, club, url, KINDS, timestamps.utc_now(), local)
    make_staff(sessions, ADMIN, clubs=["granite"])


def _publish(base: str, member: Member) -> None:
    """Each kind once; an invalid one (422) whose email is the member's name and email; an
    idempotency key used again with other data (409)."""
    events = f"{base}/internal/v1/clubs/granite/events"
    for kind in KINDS:
        assert _post(events, {"event": kind, "data": member.data(kind)}) == 201
    invalid = member.data("member.updated")
    invalid["member"]["email"] = f"{member.name} <{member.email}>"
    assert _post(events, {"event": "member.updated", "data": invalid}) == 422
    once = {"Idempotency-Key": f"key-{member.token[:4]}"}
    first = {"event": "member.updated", "data": member.data("member.updated", change="created")}
    again = {"event": "member.updated", "data": member.data("member.updated", change="updated")}
    assert _post(events, first, once) == 201
    assert _post(events, again, once) == 409


def _erase(base: str, member: Member) -> None:
    """A dry run, the erasure, and one refused (422) whose email is the name and email."""
    erasures = f"{base}/internal/v1/clubs/granite/erasures"
    assert _post(erasures, {"email": member.email, "dryRun": True}) == 200
    assert _post(erasures, {"email": member.email}) == 201
    assert _post(erasures, {"email": f"{member.name} <{member.email}>"}) == 422


def _post(url: str, body: object, headers: dict[str, str] | None = None) -> int:
    """The status of POST ``url`` with ``body`` as JSON, by the platform."""
    sent = {**AUTH, "Content-Type": "application/json", **(headers or {})}
    request = urllib.request.Request(url, orjson.dumps(body), sent, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code


def _unfinished(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        query = select(func.count()).where(Delivery.next_attempt_at.is_not(None))
        return session.scalar(query) or 0


def _leaks(output: str, member: Member) -> list[str]:
    found = member.pattern()
    return [line for line in output.splitlines() if personal_data.holds(line, found)]


def test_no_line_of_any_process_holds_a_members_name_or_email(
    settings: Settings,
    sessions: sessionmaker[Session],
    tls: Authority,
    receivers: list[Receiver],
    member: Member,
    tmp_path: Path,
) -> None:
    refused = f"https://127.0.0.1:{free_port()}/hooks"  # (e) nothing listens there
    _club(sessions, settings, [receiver.url for receiver in receivers] + [refused])
    mailbox = Mailbox()
    port = free_port()
    on_postgres = not settings.database_url.startswith("sqlite")
    with smtp_server(mailbox) as smtp, Workers(tmp_path, _environment(settings, tls, smtp)) as run:
        processes = [run.start()] if on_postgres else []
        for worker in processes:
            run.ready(worker)
        processes.append(run.start("serve", "--port", str(port)))
        wait_for(f"http://127.0.0.1:{port}/readyz", {})
        _publish(f"http://127.0.0.1:{port}", member)
        run.until(lambda: _unfinished(sessions) == 0, "every delivery finished", 60)
        mailbox.wait_for(FAILING)
        run.until(lambda: run.outputs().count(' sent"') >= FAILING, "a line per email sent")
        _erase(f"http://127.0.0.1:{port}", member)
        for process in processes:
            run.interrupt(process)
            process.wait(30)
        output = run.outputs()
    echoed = orjson.loads(receivers[0].received[0].body)["data"]["member"]
    assert echoed == {**echoed, "name": member.name, "email": member.email}
    assert '"event":"attempt"' in output, output
    assert "redirect not followed" in output, output
    assert '"event":"erased"' in output, output
    assert _leaks(output, member) == []
    emails = "\n".join(f"{m['Subject']}\n{m.get_content()}" for m in mailbox.messages)
    assert "redirect not followed (302 to [not logged])" in emails, emails
    assert _leaks(emails, member) == []  # sent where no erasure can follow


def _environment(settings: Settings, tls: Authority, smtp: int) -> dict[str, str]:
    return worker_environment(
        settings.database_url,
        tls.bundle,
        CLUBWIRE_PLATFORM_TOKEN=PLATFORM_TOKEN,
        CLUBWIRE_LOG_LEVEL="debug",
        CLUBWIRE_SMTP_URL=f"smtp://127.0.0.1:{smtp}",
        CLUBWIRE_MAIL_FROM="clubwire <hooks@granite.example>",
        CLUBWIRE_PUBLIC_URL="https://hooks.granite.example",
    )
