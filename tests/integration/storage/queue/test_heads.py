"""The queue heads never fall behind their deliveries (ADR 0008): after any sequence of what
moves deliveries (publish, claim and record, give back, Retry, switch an endpoint or a
club's module off and on, resend, delete), every endpoint with an unfinished delivery has a
head due no later than that delivery (or than now: a lane given back with work due queues
behind the others), and a head with nothing unfinished behind it is due never. A head due
too late would hold deliveries back; too early (a second Retry of one delivery moves it a
little later) only costs a worker one look."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import sqlite3
import threading
from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from sqlalchemy import func, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import off_reasons
from clubwire.domain.delivering import Result, RetrySchedule, judge
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import claims, deliveries, events, records
from clubwire.settings import Settings
from clubwire.storage import database, notices
from clubwire.storage.models import Club, Delivery, Endpoint, QueueHead
from clubwire.storage.queue import Want, postgres, sqlite
from tests.factories import (
    EPOCH,
    make_club,
    make_endpoint,
    queue_order,
    receiver_settings,
    registration,
)

SCHEDULE = RetrySchedule((60, 300, 1800))
LEASE = timedelta(seconds=60)
TOKEN = "wkr_me"


def _publish(session: Session, rng: random.Random, now: datetime) -> None:
    club = rng.choice(session.scalars(select(Club)).all())
    events.publish(session, club, "registration.created", registration(), now)


def _attempt(sessions: sessionmaker[Session], rng: random.Random, now: datetime) -> None:
    """A worker's round: lease what is due, attempt some of it, record, give the lanes back."""
    with sessions.begin() as session:
        lanes = claims.take_lanes(session, now, now + LEASE, TOKEN, rng.randint(1, 3))
    with sessions() as session:
        wants = {lane.endpoint_id: Want(lane, rng.randint(1, 4), now + LEASE) for lane in lanes}
        jobs, _ = claims.claim(session, now, TOKEN, wants)
    attempted = [job for job in jobs if rng.random() < 0.8]  # the rest given back unattempted
    results = []
    for job in attempted:
        ok = rng.random() < 0.5
        verdict = judge(job, ok, now, SCHEDULE, rng.random())
        results.append(Result(job, now, ok, 200 if ok else 503, None, 3, "", verdict))
    with sessions.begin() as session:
        records.record(session, results, now)
    with sessions.begin() as session:
        claims.give_back(session, [lane.endpoint_id for lane in lanes], TOKEN, now)


def _staff(session: Session, rng: random.Random, now: datetime) -> None:
    """One of the things staff (or the superadmin) do that moves deliveries."""
    endpoint = rng.choice(session.scalars(select(Endpoint)).all())
    club = session.get_one(Club, endpoint.club_id)
    action = rng.choice(["retry", "off", "on", "resend", "module", "delete"])
    if action == "retry":
        ids = session.scalars(select(Delivery.id).where(Delivery.endpoint_id == endpoint.id)).all()
        if ids:
            with contextlib.suppress(errors.InvalidInput):  # refused while off: nothing moves
                deliveries.retry(session, club.id, rng.choice(ids), now)
    elif action == "off":
        endpoints.disable_endpoint(session, club.id, endpoint.id, now, off_reasons.OffReason.STAFF)
    elif action in ("on", "resend"):
        endpoints.enable_endpoint(session, club.id, endpoint.id, now, action == "resend")
    elif action == "module":
        clubs.set_webhooks_module(session, club.slug, not club.webhooks_enabled, now)
    elif len(session.scalars(select(Endpoint)).all()) > 2:
        endpoints.delete_endpoint(session, club.id, endpoint.id)


def _check(sessions: sessionmaker[Session], now: datetime) -> None:
    with sessions() as session:
        _check_entries(session)
        earliest = dict(
            session.execute(
                select(Delivery.endpoint_id, func.min(Delivery.next_attempt_at))
                .where(Delivery.next_attempt_at.is_not(None))
                .group_by(Delivery.endpoint_id)
            ).all()
        )
        heads = {head.endpoint_id: head for head in session.scalars(select(QueueHead))}
    for endpoint_id, due in earliest.items():
        assert due is not None
        head = heads[endpoint_id]
        assert head.lease_until is None  # every lane was given back
        assert head.next_due_at is not None
        assert head.next_due_at <= max(due, now)  # given back with work due: behind others
    stale = [e for e, head in heads.items() if e not in earliest and head.next_due_at]
    assert stale == []


def _check_entries(session: Session) -> None:
    """On PostgreSQL, the queue's order (``queue_entries``, kept by the deliveries'
    triggers) is exactly the deliveries with an attempt due, at their due times."""
    if session.connection().dialect.name != "postgresql":
        return  # SQLite reads the deliveries' own partial index
    entries, waiting = queue_order(session.connection())
    assert entries == waiting


@pytest.mark.parametrize("seed", range(4))
def test_heads_keep_up_with_their_deliveries(
    sessions: sessionmaker[Session], settings: Settings, seed: int
) -> None:
    rng = random.Random(seed)
    with sessions.begin() as session:
        for slug in ("granite", "pebble"):
            club = make_club(session, slug)
            for _ in range(2):
                make_endpoint(session, club, settings)
    now = EPOCH
    for _ in range(60):
        now += timedelta(seconds=rng.choice([0, 1, 30, 90, 400]))
        step = rng.random()
        if step < 0.4:
            with sessions.begin() as session:
                _publish(session, rng, now)
        elif step < 0.8:
            _attempt(sessions, rng, now)
        else:
            with sessions.begin() as session:
                _staff(session, rng, now)
        _check(sessions, now)


def test_listening_workers_are_told_which_endpoint_changed(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """On PostgreSQL every change a lane must see names its endpoint, at commit: a publish and
    a Retry as due, a new secret and an edit as changed (so that a worker reads the endpoint
    again only then). (SQLite's one worker sees any commit to the file.)"""
    if settings.is_sqlite:
        pytest.skip("NOTIFY is PostgreSQL's")
    hooks = receiver_settings(settings)
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = make_endpoint(session, club, settings)
    url = make_url(settings.sqlalchemy_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as listener:
        listener.execute(f"LISTEN {postgres.CHANNEL}")
        listener.execute(f"LISTEN {postgres.CHANGED_CHANNEL}")
        due, changed = postgres.CHANNEL, postgres.CHANGED_CHANNEL
        changes: list[tuple[Callable[[Session], object], str]] = [
            (lambda s: events.publish(s, club, "registration.created", registration(), EPOCH), due),
            (lambda s: endpoints.rotate_secret(s, club.id, endpoint.id, EPOCH, hooks), changed),
            (
                lambda s: endpoints.update_endpoint(
                    s, club.id, endpoint.id, EPOCH, hooks, max_rate=5
                ),
                changed,
            ),
            (
                lambda s: deliveries.retry(
                    s, club.id, s.scalars(select(Delivery.id)).first() or "", EPOCH
                ),
                due,
            ),
        ]
        for change, channel in changes:
            with sessions.begin() as session:
                change(session)
            (notice,) = list(listener.notifies(timeout=5, stop_after=1))
            assert (notice.channel, notice.payload) == (channel, endpoint.id)


def test_a_publish_to_more_endpoints_than_a_notice_holds_marks_and_names_them_all(
    sessions: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL marks the heads, and each notice after the commit names a chunk of them."""
    if settings.is_sqlite:
        pytest.skip("NOTIFY is PostgreSQL's")
    monkeypatch.setattr(notices, "WORDS_PER_NOTICE", 2)
    with sessions.begin() as session:
        club = make_club(session)
        made = sorted(make_endpoint(session, club, settings)[0].id for _ in range(5))
    url = make_url(settings.sqlalchemy_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as listener:
        listener.execute(f"LISTEN {postgres.CHANNEL}")
        with sessions.begin() as session:
            events.publish(session, club, "registration.created", registration(), EPOCH)
        heard = list(listener.notifies(timeout=5, stop_after=3))
    assert [notice.payload.split() for notice in heard] == [made[:2], made[2:4], made[4:]]
    with sessions() as session:
        due = dict(session.execute(select(QueueHead.endpoint_id, QueueHead.next_due_at)).all())
    assert due == dict.fromkeys(made, EPOCH)


def test_a_lane_given_back_with_work_due_is_told_to_listening_workers(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """So that an idle worker may take its turn; a lane given back with nothing due is not."""
    if settings.is_sqlite:
        pytest.skip("NOTIFY is PostgreSQL's")
    with sessions.begin() as session:
        club = make_club(session)
        busy, done = (make_endpoint(session, club, settings)[0].id for _ in range(2))
        events.publish(session, club, "registration.created", registration(), EPOCH)
    with sessions.begin() as session:  # one endpoint's delivery finishes: nothing due there
        finished = update(Delivery).where(Delivery.endpoint_id == done)
        session.execute(finished.values(status="succeeded", next_attempt_at=None))
    with sessions.begin() as session:
        claims.take_lanes(session, EPOCH, EPOCH + LEASE, TOKEN, 10)
    url = make_url(settings.sqlalchemy_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as listener:
        listener.execute(f"LISTEN {postgres.CHANNEL}")
        with sessions.begin() as session:
            claims.give_back(session, [busy, done], TOKEN, EPOCH)
        notices = list(listener.notifies(timeout=2, stop_after=2))
    assert [notice.payload for notice in notices] == [busy]


def test_a_lane_a_wake_up_named_is_leased_once_the_publish_holding_it_commits(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """A publish holds its endpoints' heads until it commits; taking any due lane skips them
    (``SKIP LOCKED``), but a lane a wake-up named waits for the publish and is leased: during
    a burst to one club, some publish nearly always holds its heads (issue 31)."""
    if settings.is_sqlite:
        pytest.skip("SQLite has one writer at a time: no head is held while another leases")
    with sessions.begin() as session:
        club = make_club(session)
        endpoint_id = make_endpoint(session, club, settings)[0].id
        events.publish(session, club, "registration.created", registration(), EPOCH)
    publishing = sessions()
    publishing.begin()
    events.publish(publishing, publishing.get_one(Club, club.id), "registration.created",
                   registration(), EPOCH)  # fmt: skip
    with sessions.begin() as session:
        assert claims.take_lanes(session, EPOCH, EPOCH + LEASE, TOKEN, 1) == []
    committer = threading.Timer(0.3, publishing.commit)
    committer.start()
    try:
        with sessions.begin() as session:
            leased = claims.take_lanes(session, EPOCH, EPOCH + LEASE, TOKEN, 1, [endpoint_id])
    finally:
        committer.join()
        publishing.close()
    assert [lane.endpoint_id for lane in leased] == [endpoint_id]


@pytest.mark.parametrize("quiet_after", [sqlite.QUIET_AFTER, 0.0], ids=["busy", "quiet"])
def test_the_sqlite_worker_is_woken_by_other_connections_commits_only(
    sessions: sessionmaker[Session],
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
    quiet_after: float,
) -> None:
    """Its own records (on the link's records connection) do not wake it; a publish on any
    other connection does, also once it looks less often after a quiet spell (``quiet``:
    from its first look)."""
    if not settings.is_sqlite:
        pytest.skip("PostgreSQL's workers are woken by NOTIFY")
    monkeypatch.setattr(sqlite, "QUIET_AFTER", quiet_after)
    with sessions.begin() as session:
        club = make_club(session)
        make_endpoint(session, club, settings)
        events.publish(session, club, "registration.created", registration(), EPOCH)

    def publish() -> None:
        with sessions.begin() as session:
            events.publish(session, club, "registration.created", registration(), EPOCH)

    assert asyncio.run(_wake_ups(sessions, publish)) == [None, None]


def test_the_sqlite_worker_stops_listening_with_the_error_when_it_cannot_look(
    settings: Settings, tmp_path: Path
) -> None:
    """A file SQLite cannot read: listening ends with its error rather than looking no more
    in silence."""
    if not settings.is_sqlite:
        pytest.skip("PostgreSQL's workers are woken by NOTIFY")
    link = claims.link(_unreadable(tmp_path))

    async def listen() -> None:
        try:
            await asyncio.wait_for(link.listen(lambda _endpoint_ids, _changed: None), timeout=10)
        finally:
            await link.close()

    with pytest.raises(sqlite3.DatabaseError, match="not a database"):
        asyncio.run(listen())


def test_a_worker_whose_listening_fails_logs_it_and_listens_again(
    settings: Settings,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each failure is logged with its error, and the worker listens again a moment later
    (until then, and if it never comes back, the worker looks for due work at its safety
    poll)."""
    if not settings.is_sqlite:
        pytest.skip("an SQLite file that cannot be read is the failure at hand")
    monkeypatch.setattr("clubwire.storage.queue.link.LISTEN_AGAIN_AFTER", 0.01)
    link = claims.link(_unreadable(tmp_path))

    async def listen_until_failed_twice() -> None:
        listening = asyncio.create_task(link.keep_listening(lambda _endpoint_ids, _changed: None))
        try:
            for _ in range(1000):
                if len(_listening_failures(caplog)) >= 2 or listening.done():
                    break
                await asyncio.sleep(0.01)
            assert not listening.done()
        finally:
            listening.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listening
            await link.close()

    asyncio.run(listen_until_failed_twice())
    failures = _listening_failures(caplog)
    assert len(failures) >= 2
    assert all(
        record.exc_info and isinstance(record.exc_info[1], sqlite3.DatabaseError)
        for record in failures
    )


def _unreadable(tmp_path: Path) -> sessionmaker[Session]:
    path = tmp_path / "not-a-database.db"
    path.write_bytes(b"not a database file " * 256)
    return database.sessions(database.sqlite_engine(make_url(f"sqlite:///{path}")))


def _listening_failures(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [
        record for record in caplog.records if "listening for due work failed" in record.message
    ]


def test_the_sqlite_workers_connections_keep_their_temporary_files_in_memory(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """The worker's own connections (claims, and leases and records) keep statement journals
    in memory, checkpoint the log every 10,000 pages and cache 32 MiB (ADR 0008 session 18);
    the other connections keep SQLite's defaults."""
    if not settings.is_sqlite:
        pytest.skip("PostgreSQL's workers have options of their own")
    link = claims.link(sessions)

    async def worker_pragmas() -> tuple[tuple[int, ...], tuple[int, ...]]:
        try:
            return (
                await link.claiming(_pragmas, link.sessions),
                await link.recording(_pragmas, link.sessions),
            )
        finally:
            await link.close()

    memory, checkpoint, cache = 2, 10_000, -32 * 1024
    assert asyncio.run(worker_pragmas()) == ((memory, checkpoint, cache),) * 2
    assert _pragmas(sessions) == (0, 1000, -2000)


def _pragmas(sessions: sessionmaker[Session]) -> tuple[int, ...]:
    with sessions() as session:
        names = ("temp_store", "wal_autocheckpoint", "cache_size")
        return tuple(session.execute(text(f"PRAGMA {name}")).scalar_one() for name in names)


def test_postgresql_runs_the_workers_statements_on_its_event_loop(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """No thread of the worker trades the interpreter's lock with the loop's (ADR 0008
    session 14), yet a step waiting for PostgreSQL gives the loop back: a claim comes back
    while a record still waits for a lock that this test holds."""
    if settings.is_sqlite:
        pytest.skip("SQLite's statements run on threads of the link's own")
    url = make_url(settings.sqlalchemy_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(12)")
        record_thread, claim_thread, loop_thread = asyncio.run(_steps(sessions, holder))
    assert record_thread == claim_thread == loop_thread


async def _steps(
    sessions: sessionmaker[Session], holder: psycopg.Connection[tuple[object, ...]]
) -> tuple[int, int, int]:
    """The threads a record (held up by ``holder``'s lock) and a claim ran on, and the loop's."""
    link = claims.link(sessions)
    try:
        recording = asyncio.create_task(link.recording(_on_thread, link.sessions, locked=True))
        await _waiting_for_lock(holder)
        claim_thread = await link.claiming(_on_thread, link.sessions)
        assert not recording.done()
        holder.execute("SELECT pg_advisory_unlock(12)")
        return await recording, claim_thread, threading.get_ident()
    finally:
        await link.close()


async def _waiting_for_lock(holder: psycopg.Connection[tuple[object, ...]]) -> None:
    """Until a session waits for the test's advisory lock (the record has reached it)."""
    waiting = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    for _ in range(500):
        row = holder.execute(waiting).fetchone()
        if row is not None and row[0]:
            return
        await asyncio.sleep(0.01)


def _on_thread(sessions: sessionmaker[Session], locked: bool = False) -> int:
    """A statement (waiting for the test's lock first, if ``locked``); the thread it ran on."""
    with sessions.begin() as session:
        if locked:
            session.execute(text("SELECT pg_advisory_xact_lock(12)"))
        session.execute(select(func.count()).select_from(QueueHead))
    return threading.get_ident()


async def _wake_ups(
    sessions: sessionmaker[Session], publish: Callable[[], None]
) -> list[Collection[str] | None]:
    """The link's wake-ups: at the start, after three writes on its records' thread (as a
    worker records and gives lanes back), and after ``publish``."""
    link = claims.link(sessions)
    woken: list[Collection[str] | None] = []
    listening = asyncio.create_task(link.listen(lambda ids, _changed: woken.append(ids)))
    try:
        await _settled(woken, 1)  # at the start, any may have work
        for _ in range(3):
            await link.recording(_lease_all, link.sessions)
        await _settled(woken, 1)
        publish()
        await _settled(woken, 2)
    finally:
        listening.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await listening
        await link.close()
    return woken


def _lease_all(sessions: sessionmaker[Session]) -> None:
    """Lease the due lane and give it back: two writes."""
    with sessions.begin() as session:
        (lane,) = claims.take_lanes(session, EPOCH, EPOCH + LEASE, TOKEN, 10)
    with sessions.begin() as session:
        claims.give_back(session, [lane.endpoint_id], TOKEN, EPOCH)


async def _settled(woken: list[Collection[str] | None], count: int) -> None:
    """Until ``woken`` holds ``count`` wake-ups, then a few more looks for any extra one."""
    for _ in range(200):
        if len(woken) >= count:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(sqlite.CHECK_QUIET * 2)
    assert len(woken) == count
