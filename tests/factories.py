"""Factories for test data: realistic defaults, every field overridable."""

from __future__ import annotations

import random
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from sqlalchemy import Connection, select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog, program_wire, scopes
from clubwire.domain.delivering import Job, Result, RetrySchedule, Status, judge
from clubwire.services import clubs, endpoints, programs
from clubwire.services.club_api import keys
from clubwire.services.delivery import claims, events
from clubwire.services.staff import users, web_sessions
from clubwire.settings import Settings
from clubwire.storage import queue
from clubwire.storage.models import ApiKey, Club, Delivery, Endpoint, Program, QueueEntry
from clubwire.storage.queue import Want

EPOCH = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
PASSWORD = "correct horse battery staple"  # every user's the factories make


class FakeClock:
    """A clock that stands still until a test moves it."""

    def __init__(self, now: datetime = EPOCH) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def make_club(
    session: Session, slug: str = "granite", *, enabled: bool = True, name: str = ""
) -> Club:
    club, _ = clubs.put_club(session, slug, name or f"{slug.title()} Curling Club", EPOCH)
    clubs.set_webhooks_module(session, slug, enabled, EPOCH)
    return club


def program_data(**overrides: Any) -> dict[str, Any]:
    """A program as the platform sends it, in the API's field names."""
    data: dict[str, Any] = {
        "name": "Tuesday Night League",
        "description": "Social league, two draws a night.",
        "type": "LEAGUE",
        "status": "ACTIVE",
        "startDate": "2026-01-13T18:30:00.000Z",
        "endDate": "2026-03-31T22:00:00.000Z",
        "price": "325.00",
        "capacity": 48,
        "private": False,
    }
    data.update(overrides)
    return data


def make_program(
    session: Session, club: Club, program_id: str = "prg_1", **overrides: Any
) -> Program:
    record = program_wire.ProgramData.model_validate(program_data(**overrides))
    program, _ = programs.put_program(session, club, program_id, record, EPOCH)
    return program


def make_key(
    session: Session,
    club: Club,
    granted: tuple[str, ...] = (scopes.READ_PROGRAMS,),
    name: str = "test",
) -> tuple[ApiKey, str]:
    return keys.create_key(session, club, granted, name, EPOCH)


def make_staff(
    sessions: sessionmaker[Session],
    email: str,
    *,
    superadmin: bool = False,
    clubs: Iterable[str] = (),
) -> None:
    """A user of the settings area, with ``PASSWORD``, admin of ``clubs`` (by slug)."""
    with sessions.begin() as session:
        users.create_user(session, email, PASSWORD, EPOCH, superadmin, clubs)


def make_web_session(sessions: sessionmaker[Session], email: str = "admin@granite.example") -> str:
    """A signed-in browser's web session, by its id (the hash of its token)."""
    with sessions.begin() as session:
        user = users.create_user(session, email, PASSWORD, EPOCH)
        token = web_sessions.start(session, user, EPOCH)
        found = web_sessions.find(session, token, EPOCH)
    assert found is not None
    return found.session_id


def price(value: str) -> Decimal:
    return Decimal(value)


def receiver_settings(settings: Settings, **overrides: Any) -> Settings:
    """The test settings, allowing local receivers."""
    return settings.model_copy(update={"allow_private_targets": True, **overrides})


def make_endpoint(
    session: Session,
    club: Club,
    settings: Settings,
    url: str = "https://127.0.0.1:9/hooks",
    kinds: tuple[str, ...] = ("registration.created", "payment.completed"),
) -> tuple[Endpoint, str]:
    return endpoints.create_endpoint(session, club, url, kinds, EPOCH, receiver_settings(settings))


def registration(**overrides: Any) -> dict[str, Any]:
    """A valid ``registration.created`` data object."""
    data: dict[str, Any] = event_catalog.sample("registration.created", EPOCH, random.Random(7))
    data.update(overrides)
    return data


def about(kind: str, seed: int = 0, **member: str) -> dict[str, Any]:
    """A valid ``data`` of ``kind`` (one that carries a member) about this member: its id,
    name and email as given."""
    data: dict[str, Any] = event_catalog.sample(kind, EPOCH, random.Random(seed))
    data["member"] = {**data["member"], **member}
    return data


def make_delivery(
    session: Session,
    club: Club,
    endpoint: Endpoint,
    created: datetime,
    status: Status = Status.DEAD,
    kind: str = "registration.created",
) -> str:
    """A delivery of a new ``kind`` event, created at ``created``, finished as ``status``
    (``pending``: still due)."""
    data = event_catalog.sample(kind, created, random.Random(1))
    payload = event_catalog.validate(kind, data)
    event = events.record_event(session, club, kind, payload, created)
    events.fan_out(session, event, [endpoint], created)
    finished = status is not Status.PENDING
    session.execute(
        update(Delivery)
        .where(Delivery.event_id == event.id)
        .values(status=status, next_attempt_at=None if finished else created)
    )
    connection = session.connection()
    queue.on(connection).refresh(connection, [endpoint.id])
    return session.scalars(select(Delivery.id).where(Delivery.event_id == event.id)).one()


def claim_jobs(
    session: Session, token: str, lanes: int = 5, per_lane: int = 10, now: datetime = EPOCH
) -> list[Job]:
    """The due deliveries of up to ``lanes`` lanes, ``per_lane`` each, claimed by the worker
    ``token`` at ``now`` under a lease of a minute."""
    until = now + timedelta(seconds=60)
    leased = claims.take_lanes(session, now, until, token, lanes)
    jobs, _ = claims.claim(
        session, now, token, {lane.endpoint_id: Want(lane, per_lane, until) for lane in leased}
    )
    return jobs


def answered(
    job: Job,
    code: int | None,
    excerpt: str = "",
    error: str | None = None,
    retry_after: str | None = None,
) -> Result:
    """What an attempt of ``job`` at ``EPOCH`` gave, judged on the default schedule: a 2xx
    ``code`` is a success."""
    ok = code is not None and 200 <= code < 300
    verdict = judge(job, ok, EPOCH, RetrySchedule(), 0.5, code=code)
    return Result(job, EPOCH, ok, code, error, 7, excerpt, verdict, retry_after=retry_after)


def queue_order(connection: Connection) -> tuple[set[tuple[Any, ...]], set[tuple[Any, ...]]]:
    """PostgreSQL's queue entries, and the deliveries with an attempt due that they should
    be, each as (delivery id, endpoint id, due time)."""
    entries = select(QueueEntry.delivery_id, QueueEntry.endpoint_id, QueueEntry.due_at)
    due = select(Delivery.id, Delivery.endpoint_id, Delivery.next_attempt_at).where(
        Delivery.next_attempt_at.is_not(None)
    )
    return (
        {tuple(row) for row in connection.execute(entries)},
        {tuple(row) for row in connection.execute(due)},
    )
