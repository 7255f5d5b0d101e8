"""Ordered delivery with real ``clubwire worker`` processes and real TLS receivers, on both
databases (issue 35's targets, ADR 0017).

An ordered endpoint gets the deliveries of one ordering key one at a time, in sequence
order: a later one is held until the earlier one succeeded or died, and then released at
once (after a death, telling the receiver the sequence it missed). Each receiver here
records every request it answered: the event's id, ordering key and sequence (read from
the envelope), the status it answered, when (``time.monotonic``), and the missed-sequence
header.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog, ordering, timestamps
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Club, Delivery
from tests.factories import EPOCH, make_club
from tests.functional.workers import PATIENT, Workers, count_settled, worker_environment
from tests.receiver import Authority, authority, listening

pytestmark = pytest.mark.slow

GAME = "game.updated"


# --- a receiver that records what it answered ---------------------------------------------------


@dataclass(frozen=True)
class Arrival:
    """One request as the receiver saw it, and what it answered."""

    event_id: str
    key: str
    sequence: int
    status: int
    at: float  # time.monotonic() as it arrived (and was answered: at once)
    missed: str | None  # the X-Service-Missed-Sequence header

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


# What to answer a request: from its ordering key, its sequence and how many requests of its
# event came before it.
Answer = Callable[[str, int, int], int]


def always_ok(key: str, sequence: int, seen: int) -> int:
    return 200


@dataclass
class Recorder:
    """Answers each request as ``answer`` says and keeps the arrivals in the order they came."""

    answer: Answer = always_ok
    arrivals: list[Arrival] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    async def handle(self, request: web.Request) -> web.Response:
        envelope = orjson.loads(await request.read())
        event_id, key, sequence = envelope["id"], envelope["orderingKey"], envelope["sequence"]
        with self.lock:
            seen = sum(1 for arrival in self.arrivals if arrival.event_id == event_id)
            status = self.answer(key, sequence, seen)
            missed = request.headers.get(ordering.MISSED_HEADER)
            arrival = Arrival(event_id, key, sequence, status, time.monotonic(), missed)
            self.arrivals.append(arrival)
        return web.Response(status=status, text=f"answered {status}")

    def seen(self) -> list[Arrival]:
        with self.lock:
            return list(self.arrivals)

    def of(self, key: str, sequence: int) -> list[Arrival]:
        return [a for a in self.seen() if (a.key, a.sequence) == (key, sequence)]

    def succeeded(self, key: str, sequence: int) -> Arrival | None:
        return next((a for a in self.of(key, sequence) if a.ok), None)


@contextmanager
def recording(tls: Authority, answer: Answer = always_ok) -> Iterator[tuple[Recorder, str]]:
    """A recording receiver over TLS; yields it and its URL."""
    recorder = Recorder(answer)
    with listening(tls, recorder.handle) as url:
        yield recorder, url


# --- the club, its endpoints and its events -----------------------------------------------------


def game(game_id: str) -> dict[str, Any]:
    """A valid ``game.updated`` about the game ``game_id`` (its key: ``game:<game_id>``)."""
    data: dict[str, Any] = event_catalog.sample(GAME, EPOCH, random.Random(7))
    data["game"] = {**data["game"], "id": game_id}
    return data


def add_endpoint(
    sessions: sessionmaker[Session], settings: Settings, url: str, ordered: bool
) -> str:
    """An endpoint of granite (made if need be) for ``game.updated``."""
    hooks = settings.model_copy(update={"allow_private_targets": True})
    with sessions.begin() as session:
        club = session.scalar(select(Club).where(Club.slug == "granite")) or make_club(session)
        endpoint, _ = endpoints.create_endpoint(
            session, club, url, [GAME], timestamps.utc_now(), hooks, ordered=ordered
        )
        return endpoint.id


def publish(sessions: sessionmaker[Session], *game_ids: str) -> list[str]:
    """One event about each game, each in a transaction of its own (as the API publishes),
    due now; their ids."""
    ids = []
    for game_id in game_ids:
        with sessions.begin() as session:
            club = session.scalar(select(Club).where(Club.slug == "granite"))
            assert club is not None
            event, _ = events.publish(session, club, GAME, game(game_id), timestamps.utc_now())
            ids.append(event.id)
    return ids


def delivery(sessions: sessionmaker[Session], endpoint_id: str, event_id: str) -> Delivery:
    with sessions() as session:
        found = session.scalar(
            select(Delivery).where(
                Delivery.endpoint_id == endpoint_id, Delivery.event_id == event_id
            )
        )
        assert found is not None
        session.expunge(found)
        return found


def started(workers: Workers, count: int = 1) -> None:
    """``count`` worker processes, each ready to deliver."""
    for process in [workers.start() for _ in range(count)]:
        workers.ready(process)


# --- 1. many keys, a flaky receiver, two workers ------------------------------------------------

KEYS = 100
# The target is 10,000 events; on this 2-core machine a publish costs PostgreSQL
# about 12 ms (four publishers reach 80 a second alone, some 35 a second beside two workers,
# ordered or not, and the receiver, all sharing the two cores), so 10,000 would take about
# five minutes. 1,200 keep the test near half a minute; SQLite (one worker, and one writer
# the publishers share with it) gets fewer. ``CLUBWIRE_TEST_ORDERED_EVENTS=10000`` runs the
# issue's full target on both.
FULL_RUN = int(os.environ.get("CLUBWIRE_TEST_ORDERED_EVENTS", "0"))
EVENTS = {"postgresql": FULL_RUN or 1_200, "sqlite": FULL_RUN or 600}
PUBLISHERS = {"postgresql": 4, "sqlite": 2}
FAILING = 0.1


def test_many_keys_through_a_flaky_receiver_arrive_in_order_each_once(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """Events over 100 keys, published by several publishers at once while the workers
    deliver (two on PostgreSQL; SQLite runs exactly one) to an ordered endpoint whose
    receiver answers 500 to a tenth of the requests at random. Ten retries at once (a
    delivery dies after 11 failures: one chance in 10^11, so none does): every event
    arrives, answered 2xx exactly once, and of each key the successes come in sequence
    order, 1 to n without a gap. The receiver may see a failed attempt and then its retry;
    only what it answered 2xx counts."""
    dialect = "sqlite" if settings.is_sqlite else "postgresql"
    total, publishers = EVENTS[dialect], PUBLISHERS[dialect]
    tls = authority(tmp_path)
    env = worker_environment(
        settings.database_url, tls.bundle, CLUBWIRE_RETRY_SCHEDULE=",".join("0" * 10), **PATIENT
    )
    chance = random.Random()
    lock = threading.Lock()

    def flaky(key: str, sequence: int, seen: int) -> int:
        with lock:
            return 500 if chance.random() < FAILING else 200

    published: list[str] = []

    def publishing(number: int, count: int) -> None:
        keys = random.Random(number)
        game_ids = [f"gm_{keys.randrange(KEYS):03d}" for _ in range(count)]
        ids = publish(sessions, *game_ids)
        with lock:
            published.extend(ids)

    with recording(tls, flaky) as (receiver, url), Workers(tmp_path, env) as workers:
        endpoint_id = add_endpoint(sessions, settings, url, ordered=True)
        started(workers, 1 if settings.is_sqlite else 2)
        threads = [
            threading.Thread(target=publishing, args=(number, total // publishers))
            for number in range(publishers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert not any(thread.is_alive() for thread in threads), "publishing took too long"
        assert len(published) == total
        workers.until(lambda: count_settled(sessions) == total, f"{total} deliveries", 120)
        output = workers.outputs()
    assert "Traceback" not in output, output

    arrivals = receiver.seen()
    successes = [arrival for arrival in arrivals if arrival.ok]
    answered = Counter(arrival.event_id for arrival in successes)
    assert set(answered) == set(published)  # every event delivered
    assert [event for event, times in answered.items() if times != 1] == []  # each once
    by_key: dict[str, list[int]] = defaultdict(list)
    for arrival in successes:
        by_key[arrival.key].append(arrival.sequence)
    inversions = [
        (key, earlier, later)
        for key, sequences in by_key.items()
        for earlier, later in itertools.pairwise(sequences)
        if later < earlier
    ]
    assert inversions == []
    assert {key: sorted(s) for key, s in by_key.items()} == {
        key: list(range(1, len(s) + 1)) for key, s in by_key.items()
    }
    assert sum(map(len, by_key.values())) == total
    assert len(by_key) == KEYS
    assert {arrival.missed for arrival in arrivals} == {None}  # none died: none missed
    assert len(arrivals) > len(successes)  # the receiver did fail some
    with sessions() as session:
        statuses = session.scalars(
            select(Delivery.status).where(Delivery.endpoint_id == endpoint_id)
        ).all()
    assert Counter(statuses) == {"succeeded": total}


# --- 2. G and H: a key waits for its own first, never for another key ---------------------------

RETRY = 2  # seconds: long enough to see what goes out while a retry waits


def test_a_key_waits_for_its_first_and_no_other_key_waits(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """G#1 is answered 500 twice, then 200; G#2 and H#1 are published just after it. H#1
    arrives at once, before G#1's first retry; G#2 arrives only after G#1's success, and
    within a second of it (the worker runs nothing else)."""
    tls = authority(tmp_path)
    env = worker_environment(
        settings.database_url, tls.bundle, CLUBWIRE_RETRY_SCHEDULE=f"{RETRY},{RETRY},{RETRY}"
    )

    def twice_then_ok(key: str, sequence: int, seen: int) -> int:
        return 500 if (key, sequence) == ("game:gm_G", 1) and seen < 2 else 200

    with recording(tls, twice_then_ok) as (receiver, url), Workers(tmp_path, env) as workers:
        add_endpoint(sessions, settings, url, ordered=True)
        started(workers)
        publish(sessions, "gm_G", "gm_G", "gm_H")
        workers.until(lambda: len(receiver.seen()) == 5, "G#1 three times, G#2 and H#1", 30)
        time.sleep(0.5)  # nothing more comes
        arrivals = receiver.seen()

    assert [(a.key, a.sequence) for a in arrivals if a.ok].count(("game:gm_G", 2)) == 1
    first_g = receiver.of("game:gm_G", 1)
    assert [a.status for a in first_g] == [500, 500, 200]
    (second_g,) = receiver.of("game:gm_G", 2)
    (first_h,) = receiver.of("game:gm_H", 1)
    g_done = first_g[-1].at
    assert first_h.ok
    assert first_h.at < first_g[1].at  # H#1 did not wait for G#1's retries
    assert second_g.at > g_done  # G#2 never before G#1's success
    assert second_g.at - g_done < 1.0  # and released at once
    assert len(arrivals) == 5
    assert {a.missed for a in arrivals} == {None}


# --- 3. a death in the middle of a key -----------------------------------------------------------


def test_after_a_death_the_next_is_told_the_sequence_missed_and_the_one_after_is_not(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """G#1 always fails, and dies after its third attempt; G#2, held until then, is released
    carrying ``X-Service-Missed-Sequence: 1``, on its first attempt (answered 500) and on
    its retry (200). G#3 follows it without the header."""
    tls = authority(tmp_path)
    env = worker_environment(settings.database_url, tls.bundle, CLUBWIRE_RETRY_SCHEDULE="0,0")

    def first_dies(key: str, sequence: int, seen: int) -> int:
        return 500 if sequence == 1 or (sequence == 2 and seen == 0) else 200

    with recording(tls, first_dies) as (receiver, url), Workers(tmp_path, env) as workers:
        endpoint_id = add_endpoint(sessions, settings, url, ordered=True)
        started(workers)
        g1, g2, g3 = publish(sessions, "gm_G", "gm_G", "gm_G")
        workers.until(lambda: count_settled(sessions) == 2, "G#2 and G#3 delivered", 30)
        arrivals = receiver.seen()

    assert [(a.sequence, a.status, a.missed) for a in arrivals] == [
        (1, 500, None),
        (1, 500, None),
        (1, 500, None),
        (2, 500, "1"),
        (2, 200, "1"),
        (3, 200, None),
    ]
    assert delivery(sessions, endpoint_id, g1).status == "dead"
    assert delivery(sessions, endpoint_id, g2).status == "succeeded"
    assert delivery(sessions, endpoint_id, g3).status == "succeeded"


# --- 4. an unordered endpoint beside an ordered one ---------------------------------------------


def test_an_unordered_endpoint_beside_an_ordered_one_never_waits(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    """In one club, the ordered endpoint's receiver fails G#1 (its retry an hour away, so
    G#2 is held there); the unordered endpoint's receiver answers 200 and gets G#1 and G#2
    at once, while the ordered endpoint's G#2 is still held."""
    tls = authority(tmp_path)
    env = worker_environment(settings.database_url, tls.bundle, CLUBWIRE_RETRY_SCHEDULE="3600")

    def first_fails(key: str, sequence: int, seen: int) -> int:
        return 500 if sequence == 1 else 200

    with (
        recording(tls, first_fails) as (waiting, ordered_url),
        recording(tls) as (free, unordered_url),
        Workers(tmp_path, env) as workers,
    ):
        ordered_id = add_endpoint(sessions, settings, ordered_url, ordered=True)
        unordered_id = add_endpoint(sessions, settings, unordered_url, ordered=False)
        started(workers)
        g1, g2 = publish(sessions, "gm_G", "gm_G")
        workers.until(lambda: count_settled(sessions) == 2, "the unordered endpoint's two", 30)
        workers.until(waiting.seen, "the ordered endpoint's G#1", 30)
        time.sleep(0.5)  # G#2 would have gone by now, if it were not held
        to_ordered, to_unordered = waiting.seen(), free.seen()

    assert [(a.sequence, a.status) for a in to_ordered] == [(1, 500)]
    assert sorted((a.sequence, a.status) for a in to_unordered) == [(1, 200), (2, 200)]
    held = delivery(sessions, ordered_id, g2)
    assert (held.status, held.attempt, held.next_attempt_at) == ("pending", 0, None)
    assert delivery(sessions, ordered_id, g1).status == "pending"  # its retry an hour away
    assert {delivery(sessions, unordered_id, e).status for e in (g1, g2)} == {"succeeded"}
