"""Ordered delivery (issue 35, ADR 0017) through the services' database steps, on both
databases: each event's place among its resource's events, and an ordered endpoint's lines
(held, released when the first of a line succeeds or dies, kept by Retry, Replay, resend
skipped, erasure and switching)."""

from __future__ import annotations

import random
import threading
from datetime import timedelta
from typing import Any

import orjson
import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import event_catalog, off_reasons, ordering
from clubwire.domain.delivering import Job, Result, RetrySchedule, Status, judge
from clubwire.domain.personal_data import Wanted
from clubwire.domain.replay_window import Window
from clubwire.services import endpoints, ordered_lines
from clubwire.services.delivery import attempts, claims, deliveries, events, records, replays
from clubwire.services.personal_data import erasures
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery, Endpoint, Event, OrderedLine
from clubwire.storage.queue import Want
from tests.factories import EPOCH, about, make_club, receiver_settings

LEASE = timedelta(seconds=60)
ME = "wkr_me"
SCHEDULE = RetrySchedule()
DIES_AT_ONCE = RetrySchedule(())


def _game(game_id: str, seed: int = 0) -> dict[str, Any]:
    data: dict[str, Any] = event_catalog.sample("game.updated", EPOCH, random.Random(seed))
    data["game"] = {**data["game"], "id": game_id}
    return data


def _endpoint(
    session: Session, club: Club, settings: Settings, ordered: bool = True, url: str = "9"
) -> Endpoint:
    kinds = ("game.updated", "registration.created", "payment.completed", "member.updated")
    endpoint, _ = endpoints.create_endpoint(
        session,
        club,
        f"https://127.0.0.1:{url}/hooks",
        kinds,
        EPOCH,
        receiver_settings(settings),
        ordered=ordered,
    )
    return endpoint


def _world(
    sessions: sessionmaker[Session], settings: Settings, ordered: bool = True
) -> tuple[Club, str]:
    with sessions.begin() as session:
        club = make_club(session)
        return club, _endpoint(session, club, settings, ordered).id


def _publish(sessions: sessionmaker[Session], club: Club, *games: str) -> list[str]:
    """Publish a game.updated of each game, in turn; the events' ids."""
    published = []
    for seed, game_id in enumerate(games):
        with sessions.begin() as session:
            event, _ = events.publish(session, club, "game.updated", _game(game_id, seed), EPOCH)
            published.append(event.id)
    return published


def _claim(sessions: sessionmaker[Session], at: timedelta = timedelta()) -> list[Job]:
    now = EPOCH + at
    with sessions.begin() as session:
        lanes = claims.take_lanes(session, now, now + LEASE, ME, 100)
    with sessions() as session:
        wants = {lane.endpoint_id: Want(lane, 100, now + LEASE) for lane in lanes}
        return claims.claim(session, now, ME, wants).jobs


def _record(
    sessions: sessionmaker[Session],
    jobs: list[Job],
    code: int,
    at: timedelta = timedelta(),
    schedule: RetrySchedule = SCHEDULE,
) -> list[str]:
    """Record each job's attempt as answered ``code`` and give the lanes back, as a worker
    does; the endpoints released."""
    now = EPOCH + at
    ok = 200 <= code < 300
    results = [
        Result(job, now, ok, code, None, 5, "", judge(job, ok, now, schedule, 0.5, code=code))
        for job in jobs
    ]
    with sessions.begin() as session:
        released = records.record(session, results, now)
    with sessions.begin() as session:
        claims.give_back(session, sorted({job.endpoint_id for job in jobs}), ME, now)
    return released


def _sequences(jobs: list[Job]) -> list[tuple[str, int]]:
    """Each job's event's place, as its body says."""
    return [_place(job.body) for job in jobs]


def _place(body: bytes) -> tuple[str, int]:
    envelope = orjson.loads(body)
    return envelope["orderingKey"], envelope["sequence"]


def _states(sessions: sessionmaker[Session]) -> dict[tuple[str, int], tuple[str, bool, bool]]:
    """Each delivery by its event's place: its status, whether it is due, whether in a line."""
    with sessions() as session:
        rows = session.execute(
            select(Event.ordering_key, Event.sequence, Delivery.status, Delivery.next_attempt_at)
            .join(Event, Event.id == Delivery.event_id)
            .add_columns(ordered_lines.in_line(Delivery.id))
        ).all()
    return {(key, seq): (status, due is not None, lined) for key, seq, status, due, lined in rows}


# -- places ------------------------------------------------------------------------------------


def test_each_event_takes_the_next_sequence_of_its_key_in_its_club(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    with sessions.begin() as session:
        granite, other = make_club(session), make_club(session, slug="other", name="Other")
    _publish(sessions, granite, "gm_a", "gm_b", "gm_a", "gm_a")
    _publish(sessions, other, "gm_a")
    with sessions() as session:
        rows = session.execute(
            select(Event.club_id, Event.ordering_key, Event.sequence, Event.body)
        ).all()
    assert sorted((club, key, seq) for club, key, seq, _ in rows) == sorted(
        [
            (granite.id, "game:gm_a", 1),
            (granite.id, "game:gm_b", 1),
            (granite.id, "game:gm_a", 2),
            (granite.id, "game:gm_a", 3),
            (other.id, "game:gm_a", 1),
        ]
    )
    assert all(_place(body) == (key, seq) for _, key, seq, body in rows)


def test_each_kind_names_its_resource() -> None:
    now = EPOCH
    keys = {
        kind: ordering.key_of(kind, event_catalog.sample(kind, now, random.Random(3)))
        for kind in event_catalog.KINDS
    }
    registration: dict[str, Any] = event_catalog.sample(
        "registration.created", now, random.Random(3)
    )
    payment: dict[str, Any] = event_catalog.sample("payment.completed", now, random.Random(3))
    assert keys["ping"] is None
    assert keys["game.updated"].startswith("game:")  # type: ignore[union-attr]
    assert keys["member.updated"].startswith("member:")  # type: ignore[union-attr]
    assert keys["practice_ice.booked"].startswith("booking:")  # type: ignore[union-attr]
    assert keys["registration.created"] == f"invoice:{registration['invoice']['id']}"
    assert keys["payment.completed"] == f"invoice:{payment['invoice']['id']}"
    registration["invoice"] = None
    enrollment = registration["enrollment"]["id"]
    assert ordering.key_of("registration.created", registration) == f"enrollment:{enrollment}"


def test_concurrent_publishers_of_one_key_get_every_sequence_once(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Eight publishers at once, 15 events each, all of one game: 1..120, none twice."""
    club, _ = _world(sessions, settings)
    failures: list[BaseException] = []

    def publisher(seed: int) -> None:
        try:
            for count in range(15):
                with sessions.begin() as session:
                    data = _game("gm_hot", seed * 100 + count)
                    events.publish(session, club, "game.updated", data, EPOCH)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=publisher, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    with sessions() as session:
        sequences = list(session.scalars(select(Event.sequence).order_by(Event.sequence)))
    assert sequences == list(range(1, 121))


# -- lines -------------------------------------------------------------------------------------


def test_a_later_delivery_of_a_key_waits_for_the_earlier_to_succeed_then_goes_at_once(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, endpoint_id = _world(sessions, settings)
    _publish(sessions, club, "gm_g", "gm_g", "gm_h")
    assert _states(sessions) == {
        ("game:gm_g", 1): ("pending", True, True),
        ("game:gm_g", 2): ("pending", False, True),  # held
        ("game:gm_h", 1): ("pending", True, True),  # another key never waits
    }
    first = _claim(sessions)
    assert sorted(_sequences(first)) == [("game:gm_g", 1), ("game:gm_h", 1)]
    assert {job.ordering_key for job in first} == {"game:gm_g", "game:gm_h"}

    released = _record(sessions, first, 200)

    assert released == [endpoint_id]
    assert _states(sessions) == {
        ("game:gm_g", 1): ("succeeded", False, False),
        ("game:gm_g", 2): ("pending", True, True),
        ("game:gm_h", 1): ("succeeded", False, False),
    }
    assert _sequences(_claim(sessions)) == [("game:gm_g", 2)]


def test_a_failed_attempt_keeps_the_rest_of_its_line_waiting(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, _ = _world(sessions, settings)
    _publish(sessions, club, "gm_g", "gm_g")
    assert _record(sessions, _claim(sessions), 503) == []
    assert _states(sessions) == {
        ("game:gm_g", 1): ("pending", True, True),  # its retry, on the schedule
        ("game:gm_g", 2): ("pending", False, True),
    }
    assert _claim(sessions, timedelta(seconds=30)) == []  # nothing due before the retry
    retried = _claim(sessions, timedelta(minutes=2))
    assert _sequences(retried) == [("game:gm_g", 1)]


def test_when_one_dies_the_next_goes_and_tells_the_receiver_which_it_missed(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, _ = _world(sessions, settings)
    _publish(sessions, club, "gm_g", "gm_g", "gm_g")
    _record(sessions, _claim(sessions), 500, schedule=DIES_AT_ONCE)
    [second] = _claim(sessions)
    assert (_place(second.body), second.missed) == (("game:gm_g", 2), 1)
    sent = attempts.headers(second, "whsec_x", 1_700_000_000)
    assert sent[ordering.MISSED_HEADER] == "1"

    _record(sessions, [second], 200)

    [third] = _claim(sessions)
    assert (_place(third.body), third.missed) == (("game:gm_g", 3), None)
    assert ordering.MISSED_HEADER not in attempts.headers(third, "whsec_x", 1_700_000_000)


def test_an_unordered_endpoint_beside_an_ordered_one_never_waits(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        _endpoint(session, club, settings, ordered=True, url="9")
        plain = _endpoint(session, club, settings, ordered=False, url="10").id
    _publish(sessions, club, "gm_g", "gm_g")
    jobs = _claim(sessions)
    assert sorted((job.endpoint_id == plain, _place(job.body)) for job in jobs) == [
        (False, ("game:gm_g", 1)),
        (True, ("game:gm_g", 1)),
        (True, ("game:gm_g", 2)),
    ]
    assert {job.ordering_key for job in jobs if job.endpoint_id == plain} == {None}


# -- Retry, Replay, resend skipped -------------------------------------------------------------


def _delivery_of(sessions: sessionmaker[Session], key: str, sequence: int) -> str:
    with sessions() as session:
        query = select(Delivery.id).join(Event, Event.id == Delivery.event_id)
        query = query.where(Event.ordering_key == key, Event.sequence == sequence)
        return session.scalars(query).one()


def test_retry_refuses_a_held_delivery_and_puts_a_finished_one_back_in_its_line(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, _ = _world(sessions, settings)
    _publish(sessions, club, "gm_g", "gm_g", "gm_g")
    held = _delivery_of(sessions, "game:gm_g", 2)
    refused = pytest.raises(errors.Conflict, match="waits for the delivery of sequence 1")
    with refused, sessions.begin() as session:
        deliveries.retry(session, club.id, held, EPOCH)
    _record(sessions, _claim(sessions), 500, schedule=DIES_AT_ONCE)  # 1 died: 2 released

    with sessions.begin() as session:  # Retry the dead one: it goes first again
        deliveries.retry(session, club.id, _delivery_of(sessions, "game:gm_g", 1), EPOCH)

    assert _states(sessions) == {
        ("game:gm_g", 1): ("dead", True, True),
        ("game:gm_g", 2): ("pending", False, True),  # held again behind it
        ("game:gm_g", 3): ("pending", False, True),
    }
    _record(sessions, _claim(sessions), 200)
    assert _sequences(_claim(sessions)) == [("game:gm_g", 2)]


def test_an_attempt_on_its_way_when_an_earlier_one_is_retried_stays_held_if_it_fails(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, _ = _world(sessions, settings)
    _publish(sessions, club, "gm_g", "gm_g")
    _record(sessions, _claim(sessions), 500, schedule=DIES_AT_ONCE)
    [second] = _claim(sessions)  # on its way
    with sessions.begin() as session:
        deliveries.retry(session, club.id, _delivery_of(sessions, "game:gm_g", 1), EPOCH)

    _record(sessions, [second], 503)

    assert _states(sessions)[("game:gm_g", 2)] == ("pending", False, True)
    _record(sessions, _claim(sessions), 200)  # the retried first one
    assert _sequences(_claim(sessions)) == [("game:gm_g", 2)]


def test_a_replay_sends_each_keys_deliveries_one_at_a_time_in_sequence_order(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, endpoint_id = _world(sessions, settings)
    _publish(sessions, club, "gm_g", "gm_h", "gm_g", "gm_g")
    for _ in range(3):
        _record(sessions, _claim(sessions), 200)
    assert all(status == "succeeded" for status, _, _ in _states(sessions).values())
    window = Window(EPOCH - timedelta(hours=1), EPOCH + timedelta(hours=1), (Status.SUCCEEDED,))

    with sessions.begin() as session:
        replayed = replays.replay(session, club.id, endpoint_id, window, EPOCH, 100)

    assert replayed.count == 4
    sent = []
    while jobs := _claim(sessions):
        sent.append(sorted(_sequences(jobs)))
        _record(sessions, jobs, 200)
    assert sent == [
        [("game:gm_g", 1), ("game:gm_h", 1)],
        [("game:gm_g", 2)],
        [("game:gm_g", 3)],
    ]


def test_resending_skipped_deliveries_keeps_their_order(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, endpoint_id = _world(sessions, settings)
    with sessions.begin() as session:
        endpoints.disable_endpoint(
            session, club.id, endpoint_id, EPOCH, off_reasons.OffReason.STAFF
        )
    _publish(sessions, club, "gm_g", "gm_g")
    with sessions.begin() as session:
        endpoints.enable_endpoint(session, club.id, endpoint_id, EPOCH, resend_skipped=True)
    assert _states(sessions) == {
        ("game:gm_g", 1): ("pending", True, True),
        ("game:gm_g", 2): ("pending", False, True),
    }


def test_switching_an_endpoint_off_takes_its_deliveries_out_of_their_lines(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, endpoint_id = _world(sessions, settings)
    _publish(sessions, club, "gm_g", "gm_g")
    with sessions.begin() as session:
        endpoints.disable_endpoint(
            session, club.id, endpoint_id, EPOCH, off_reasons.OffReason.STAFF
        )
    assert _states(sessions) == {
        ("game:gm_g", 1): ("skipped", False, False),
        ("game:gm_g", 2): ("skipped", False, False),
    }


# -- switching ---------------------------------------------------------------------------------


def test_switching_to_ordered_lines_up_only_the_deliveries_not_yet_attempted(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, endpoint_id = _world(sessions, settings, ordered=False)
    _publish(sessions, club, "gm_h")
    _record(sessions, _claim(sessions), 503)  # attempted once: keeps its own schedule
    _publish(sessions, club, "gm_g", "gm_g", "gm_h")

    with sessions.begin() as session:
        endpoints.update_endpoint(
            session, club.id, endpoint_id, EPOCH, receiver_settings(settings), ordered=True
        )

    assert _states(sessions) == {
        ("game:gm_h", 1): ("pending", True, False),
        ("game:gm_g", 1): ("pending", True, True),
        ("game:gm_g", 2): ("pending", False, True),
        ("game:gm_h", 2): ("pending", True, True),  # its earlier one goes as before
    }

    with sessions.begin() as session:
        endpoints.update_endpoint(
            session, club.id, endpoint_id, EPOCH, receiver_settings(settings), ordered=False
        )

    assert _states(sessions) == {
        ("game:gm_h", 1): ("pending", True, False),
        ("game:gm_g", 1): ("pending", True, False),
        ("game:gm_g", 2): ("pending", True, False),  # released at once
        ("game:gm_h", 2): ("pending", True, False),
    }


def test_a_job_claimed_before_a_switch_to_ordered_goes_again_in_order(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Its record does not move it (it goes in order now, as its job did not know), so its
    line cannot be left waiting for a delivery that is over."""
    club, endpoint_id = _world(sessions, settings, ordered=False)
    _publish(sessions, club, "gm_g", "gm_g")
    claimed = _claim(sessions)
    with sessions.begin() as session:
        endpoints.update_endpoint(
            session, club.id, endpoint_id, EPOCH, receiver_settings(settings), ordered=True
        )

    _record(sessions, claimed, 200)

    assert _states(sessions) == {
        ("game:gm_g", 1): ("pending", True, True),
        ("game:gm_g", 2): ("pending", False, True),
    }
    _record(sessions, _claim(sessions), 200)
    assert _sequences(_claim(sessions)) == [("game:gm_g", 2)]


# -- erasure -----------------------------------------------------------------------------------


def test_an_erased_delivery_leaves_its_line_and_the_next_tells_it_was_missed(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """A registration and its invoice's payment: the member erased, the payment goes."""
    club, _ = _world(sessions, settings)
    registration = about("registration.created", 1, email="ana@example.org")
    payment = event_catalog.sample("payment.completed", EPOCH, random.Random(2))
    payment["invoice"] = {k: registration["invoice"][k] for k in ("id", "number")}
    with sessions.begin() as session:
        events.publish(session, club, "registration.created", registration, EPOCH)
    with sessions.begin() as session:
        events.publish(session, club, "payment.completed", payment, EPOCH)
    key = f"invoice:{registration['invoice']['id']}"
    assert _states(sessions)[(key, 2)] == ("pending", False, True)

    wanted = Wanted(email="ana@example.org")
    erasures.erase(sessions, club.slug, wanted, lambda: EPOCH, erasures.By.OPERATOR, batch=10)

    assert _states(sessions) == {
        (key, 1): ("skipped", False, False),
        (key, 2): ("pending", True, True),
    }
    [payment_job] = _claim(sessions)
    assert (_place(payment_job.body), payment_job.missed) == ((key, 2), 1)


def test_lines_hold_only_deliveries_with_an_attempt_to_come(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    club, _ = _world(sessions, settings)
    _publish(sessions, club, "gm_g", "gm_g", "gm_h")
    while jobs := _claim(sessions):
        _record(sessions, jobs, 200)
    with sessions() as session:
        assert session.scalars(select(OrderedLine)).all() == []


def test_a_resend_of_more_deliveries_than_a_statement_names_keeps_every_line(
    sessions: sessionmaker[Session], settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ordered_lines, "CHUNK", 4)  # ids a statement names: 17 take five
    club, endpoint_id = _world(sessions, settings)
    with sessions.begin() as session:
        endpoints.disable_endpoint(
            session, club.id, endpoint_id, EPOCH, off_reasons.OffReason.STAFF
        )
    _publish(sessions, club, *(f"gm_{n % 3}" for n in range(17)))
    with sessions.begin() as session:
        _, resent = endpoints.enable_endpoint(
            session, club.id, endpoint_id, EPOCH, resend_skipped=True
        )

    assert resent == 17
    states = _states(sessions)
    assert all(lined for _, _, lined in states.values())
    assert sorted(place for place, (_, due, _) in states.items() if due) == [
        ("game:gm_0", 1),
        ("game:gm_1", 1),
        ("game:gm_2", 1),
    ]
