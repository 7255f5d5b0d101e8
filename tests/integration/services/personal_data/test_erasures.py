"""Erasing a member: afterwards a dump of the whole database holds neither their name nor
their email, in any spelling, while every id, kind, time and other field stays; their
deliveries not yet delivered are skipped as erased and cannot be sent again. On SQLite and
PostgreSQL, through the service the internal API and the CLI call."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import event_catalog, replay_window
from clubwire.domain.delivering import SkipReason, Status
from clubwire.domain.off_reasons import OffReason
from clubwire.domain.personal_data import MARKER, Wanted
from clubwire.services import endpoints
from clubwire.services.delivery import claims, deliveries, events, records, replays
from clubwire.services.personal_data import erasures
from clubwire.services.staff import flashes
from clubwire.settings import Settings
from clubwire.storage.models import (
    Attempt,
    Club,
    Delivery,
    Endpoint,
    Erasure,
    Event,
    EventPerson,
    OutboxEmail,
)
from tests import dumps
from tests.factories import (
    EPOCH,
    FakeClock,
    about,
    answered,
    claim_jobs,
    make_club,
    make_endpoint,
    make_web_session,
)

NAME = 'Zoë "Quill" O\'Bérubé\\Unique'
EMAIL = "Zoe.Berube+Unique7@Example.org"
MEMBER = "mbr_zoe_unique"
OLD_EMAIL = "zoe.old.unique@example.org"  # the same member, before she changed it
KINDS = ("registration.created", "member.updated", "practice_ice.booked")
LEASE = timedelta(seconds=60)


def _data(kind: str, seed: int, **member: str) -> dict[str, Any]:
    return about(kind, seed, **{"id": MEMBER, "name": NAME, "email": EMAIL, **member})


def _publish(
    session: Session, club: Club, kind: str, data: dict[str, Any], key: str | None = None
) -> str:
    event, _ = events.publish(session, club, kind, data, EPOCH, key)
    return event.id


class World:
    """A club whose member Zoë has events of every kind that carries a person, delivered,
    failed, pending and skipped, with answers, an email and a flash quoting her; another
    member of the same club, and the same member id and email in another club."""

    def __init__(self, sessions: sessionmaker[Session], settings: Settings) -> None:
        with sessions.begin() as session:
            club = make_club(session)
            self.endpoint, _ = make_endpoint(session, club, settings, kinds=KINDS)
            off, _ = make_endpoint(session, club, settings, kinds=KINDS)
            endpoints.disable_endpoint(session, club.id, off.id, EPOCH, OffReason.STAFF)
            self.zoe = [
                _publish(session, club, kind, _data(kind, seed), key=f"{kind}:{EMAIL}")
                for seed, kind in enumerate(KINDS)
            ]
            old = _data("member.updated", 9, email=OLD_EMAIL)
            self.zoe.append(_publish(session, club, "member.updated", old))
            other = event_catalog.sample("registration.created", EPOCH, random.Random(3))
            self.other = _publish(session, club, "registration.created", other, key="other-1")
            elsewhere = make_club(session, "basalt")
            self.elsewhere = _publish(
                session, elsewhere, "registration.created", _data("registration.created", 4)
            )
            self.club_id = club.id
        self.pending = self._answer(sessions)
        self.flash_session = make_web_session(sessions)
        with sessions.begin() as session:
            flashes.add(
                session,
                settings,
                self.flash_session,
                flashes.Flash("test-sent", f"Send test: redirect to /thanks?who={NAME}"),
                EPOCH,
            )
            session.add(_email(self.club_id, f"The last answer was: {EMAIL.lower()}"))

    def _answer(self, sessions: sessionmaker[Session]) -> str:
        """The first two of Zoë's deliveries to the endpoint answered (an echo; a redirect
        and a Retry-After quoting her), the others left pending; the pending one's id."""
        with sessions.begin() as session:
            jobs = claim_jobs(session, "wkr_t", lanes=1)
        mine = {event_catalog.id_of(job.body): job for job in jobs}
        echo, redirected, pending = (mine[event_id] for event_id in self.zoe[:3])
        results = [
            answered(echo, 200, echo.body.decode()),
            answered(
                redirected,
                302,
                orjson.dumps({"who": NAME}).decode(),
                f"redirect not followed (302 to https://x.example/?e={quote(EMAIL)})",
                f"120; {EMAIL}",
            ),
        ]
        with sessions.begin() as session:
            records.record(session, results, EPOCH)
            claims.give_back(session, [self.endpoint.id], "wkr_t", EPOCH)
        return pending.delivery_id


def _email(club_id: str, body: str) -> OutboxEmail:
    return OutboxEmail(
        id="eml_test_1",
        club_id=club_id,
        recipient="admin@granite.example",
        subject="An endpoint of Granite Curling Club is failing",
        body=body,
        created_at=EPOCH,
        next_attempt_at=EPOCH,
    )


@pytest.fixture
def world(sessions: sessionmaker[Session], settings: Settings) -> World:
    return World(sessions, settings)


def _erase(
    sessions: sessionmaker[Session], wanted: Wanted, dry_run: bool = False, batch: int = 2
) -> erasures.Done:
    return erasures.erase(
        sessions, "granite", wanted, FakeClock(), erasures.By.PLATFORM, dry_run=dry_run, batch=batch
    )


def test_after_an_erasure_no_dump_holds_the_members_name_or_email(
    sessions: sessionmaker[Session], settings: Settings, world: World
) -> None:
    before = dumps.dump(settings.sqlalchemy_url)
    assert dumps.found_in(before, [NAME, EMAIL])  # the search finds them where they are

    done = _erase(sessions, Wanted(email=EMAIL.upper(), member_id=MEMBER))
    in_basalt = erasures.erase(sessions, "basalt", Wanted(email=EMAIL), FakeClock(), "platform")

    after = dumps.dump(settings.sqlalchemy_url)
    assert dumps.found_in(after, [NAME, EMAIL, OLD_EMAIL]) == []
    assert world.other in after
    assert world.elsewhere in after
    assert done.counts == erasures.Counts(events=4, deliveries=3, attempts=2, emails=1, flashes=1)
    assert in_basalt.counts == erasures.Counts(events=1)


def test_events_keep_their_ids_kinds_times_and_every_field_but_the_personal_ones(
    sessions: sessionmaker[Session], world: World
) -> None:
    with sessions() as session:
        before = {e.id: orjson.loads(e.body) for e in session.scalars(select(Event))}

    _erase(sessions, Wanted(member_id=MEMBER))

    with sessions() as session:
        after = {e.id: e for e in session.scalars(select(Event))}
    for event_id in world.zoe:
        body = orjson.loads(after[event_id].body)
        member = body["data"]["member"]
        assert member == {**before[event_id]["data"]["member"], "name": MARKER, "email": MARKER}
        assert {**body, "data": {}} == {**before[event_id], "data": {}}
        assert {k: v for k, v in body["data"].items() if k != "member"} == {
            k: v for k, v in before[event_id]["data"].items() if k != "member"
        }
        assert after[event_id].payload_removed == "erased"
    for kept in (world.other, world.elsewhere):
        assert orjson.loads(after[kept].body) == before[kept]
        assert after[kept].payload_removed is None
    assert after[world.other].idempotency_key == "other-1"
    assert all(after[event_id].idempotency_key is None for event_id in world.zoe[:3])


def test_by_email_alone_only_the_persons_with_that_email_are_erased(
    sessions: sessionmaker[Session], world: World
) -> None:
    done = _erase(sessions, Wanted(email=EMAIL.lower()))

    assert done.counts.events == 3
    with sessions() as session:
        old = session.get_one(Event, world.zoe[3])
    assert OLD_EMAIL.encode() in old.body
    assert NAME.encode() not in old.body.replace(b"\\", b"")
    assert old.payload_removed is None


def test_deliveries_not_yet_delivered_are_skipped_as_erased_and_never_sent_again(
    sessions: sessionmaker[Session], world: World
) -> None:
    _erase(sessions, Wanted(member_id=MEMBER))

    with sessions() as session:
        pending = session.get_one(Delivery, world.pending)
        assert (pending.status, pending.skipped_reason) == (Status.SKIPPED, SkipReason.ERASED)
        assert pending.next_attempt_at is None
        mine = session.scalars(select(Delivery).where(Delivery.event_id.in_(world.zoe))).all()
    with sessions.begin() as session:
        jobs = claim_jobs(session, "wkr_after", now=EPOCH + timedelta(days=1))
    assert [event_catalog.id_of(job.body) for job in jobs] == [world.other]
    for delivery in mine:
        with pytest.raises(errors.Conflict, match="erased"), sessions.begin() as session:
            deliveries.retry(session, world.club_id, delivery.id, EPOCH)
    window = replay_window.Window(
        EPOCH - timedelta(hours=1), EPOCH + timedelta(hours=1), replay_window.STATUSES
    )
    with sessions.begin() as session:
        replayed = replays.replay(session, world.club_id, world.endpoint.id, window, EPOCH, 100)
    assert replayed.count == 0
    assert replayed.withheld == 4
    with sessions.begin() as session:
        off = session.scalars(select(Endpoint).where(Endpoint.enabled.is_(False))).one()
        assert endpoints.count_skipped(session, world.club_id, off.id) == 1  # the other's
        _, resent = endpoints.enable_endpoint(
            session, world.club_id, off.id, EPOCH, resend_skipped=True
        )
    assert resent == 1


def test_a_dry_run_counts_what_the_erasure_then_changes_and_changes_nothing(
    sessions: sessionmaker[Session], settings: Settings, world: World
) -> None:
    before = dumps.dump(settings.sqlalchemy_url)

    counted = _erase(sessions, Wanted(email=EMAIL, member_id=MEMBER), dry_run=True)

    assert dumps.dump(settings.sqlalchemy_url) == before
    assert counted.id is None
    done = _erase(sessions, Wanted(email=EMAIL, member_id=MEMBER))
    assert done.counts == counted.counts


def test_an_erasure_is_recorded_without_personal_data_and_a_repeat_finds_nothing(
    sessions: sessionmaker[Session], world: World
) -> None:
    done = _erase(sessions, Wanted(email=EMAIL, member_id=MEMBER))
    again = _erase(sessions, Wanted(email=EMAIL, member_id=MEMBER))

    assert again.counts == erasures.Counts()
    with sessions() as session:
        records_ = session.scalars(select(Erasure).order_by(Erasure.started_at)).all()
        assert session.scalars(select(EventPerson.event_id)).all() != []  # others kept
        left = session.scalars(
            select(EventPerson.event_id).where(EventPerson.event_id.in_(world.zoe))
        ).all()
    assert left == []
    assert {r.id for r in records_} == {done.id, again.id}
    stored = orjson.loads(next(r.counts for r in records_ if r.id == done.id))
    assert stored == asdict(done.counts)
    assert records_[0].matched_by == "email member_id"
    assert records_[0].requested_by == "platform"
    assert done.describe()["matchedBy"] == ["email", "member_id"]


def test_a_member_of_another_club_or_an_unknown_club_is_not_erased(
    sessions: sessionmaker[Session], world: World
) -> None:
    with pytest.raises(errors.NotFound):
        erasures.erase(sessions, "nope", Wanted(email=EMAIL), FakeClock(), "platform")
    done = erasures.erase(
        sessions, "basalt", Wanted(email="nobody@example.org"), FakeClock(), "platform"
    )
    assert done.counts == erasures.Counts()
    with sessions() as session:
        assert session.get_one(Event, world.zoe[0]).payload_removed is None


def test_an_attempt_on_its_way_during_the_erasure_keeps_nothing_of_the_answer(
    sessions: sessionmaker[Session], world: World
) -> None:
    with sessions.begin() as session:
        jobs = claim_jobs(session, "wkr_late", lanes=1)
    late = next(job for job in jobs if job.delivery_id == world.pending)

    _erase(sessions, Wanted(email=EMAIL))
    with sessions.begin() as session:
        records.record(
            session,
            [answered(late, 500, late.body.decode(), retry_after=f"60 {EMAIL}")],
            EPOCH,
        )

    with sessions() as session:
        attempt = session.scalars(select(Attempt).where(Attempt.delivery_id == world.pending)).one()
        delivery = session.get_one(Delivery, world.pending)
    assert (attempt.response_code, attempt.excerpt, attempt.retry_after) == (500, "", None)
    assert (delivery.status, delivery.skipped_reason) == (Status.SKIPPED, SkipReason.ERASED)


def test_an_event_published_after_an_erasure_is_kept_and_erased_by_the_next(
    sessions: sessionmaker[Session], world: World
) -> None:
    _erase(sessions, Wanted(email=EMAIL))
    with sessions.begin() as session:
        club = session.get_one(Club, world.club_id)
        later = _publish(session, club, "member.updated", _data("member.updated", 11))

    assert _erase(sessions, Wanted(email=EMAIL)).counts.events == 1
    with sessions() as session:
        assert session.get_one(Event, later).payload_removed == "erased"


def test_two_erasures_of_one_member_at_once_share_the_work_and_leave_nothing(
    sessions: sessionmaker[Session], settings: Settings, world: World
) -> None:
    wanted = Wanted(email=EMAIL, member_id=MEMBER)
    with ThreadPoolExecutor(2) as pool:
        both = list(pool.map(lambda _: _erase(sessions, wanted, batch=1), range(2)))

    assert sum(done.counts.events for done in both) == 4
    assert sum(done.counts.deliveries for done in both) == 3
    assert dumps.found_in(_dump_without(settings, world.elsewhere), [NAME, EMAIL]) == []


def test_an_erasure_racing_publishes_leaves_each_event_whole_or_erased(
    sessions: sessionmaker[Session], world: World
) -> None:
    def publish_more() -> list[str]:
        published = []
        for seed in range(20):
            with sessions.begin() as session:
                club = session.get_one(Club, world.club_id)
                data = _data("member.updated", 100 + seed)
                published.append(_publish(session, club, "member.updated", data))
        return published

    with ThreadPoolExecutor(2) as pool:
        racing = pool.submit(publish_more)
        erased = pool.submit(_erase, sessions, Wanted(email=EMAIL), False, 1)
        published, _ = racing.result(), erased.result()

    with sessions() as session:
        for event_id in published:
            event = session.get_one(Event, event_id)
            people = session.scalars(
                select(EventPerson.digest).where(EventPerson.event_id == event_id)
            ).all()
            whole = NAME.encode() in event.body.replace(b"\\\\", b"\\").replace(b'\\"', b'"')
            erased_now = event.payload_removed == "erased"
            assert (whole, erased_now, len(people)) in {(True, False, 2), (False, True, 0)}
    left = len(published) - _erased_count(sessions, published)
    assert _erase(sessions, Wanted(email=EMAIL)).counts.events == left
    assert _erased_count(sessions, published) == len(published)


def _erased_count(sessions: sessionmaker[Session], event_ids: list[str]) -> int:
    with sessions() as session:
        return len(
            session.scalars(
                select(Event.id).where(Event.id.in_(event_ids), Event.payload_removed == "erased")
            ).all()
        )


def _dump_without(settings: Settings, event_id: str) -> str:
    """The dump, but for the lines of one event (another club's, which keeps the member)."""
    text = dumps.dump(settings.sqlalchemy_url)
    return "\n".join(line for line in text.splitlines() if event_id not in line)
