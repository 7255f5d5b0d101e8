"""Measuring at the receiver: drains (deliveries/s, CPU time, losses) and light-load latency.

A drain counts only the deliveries the run expects (read from the database before it starts);
others that arrive meanwhile, sent again from earlier runs, are counted apart, and so are
duplicates (a delivery that arrived more than once, as when two workers both send it).
Deliveries/s is the number that arrived divided by the time from the first arrival to the last.

Beside the senders' CPU time, a drain tells where else its cost went on this machine: the CPU
time of the database's server processes (PostgreSQL's backends of the bench's database;
SQLite works inside the worker) and how long the senders' main threads (the event loops) were
runnable but waited for a CPU, from ``/proc`` (Linux; unknown elsewhere).
"""

from __future__ import annotations

import dataclasses
import os
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select, text

from clubwire.domain.delivering import Status
from clubwire.services import clubs
from clubwire.storage.models import Delivery
from harness import Process
from receiver import LIGHT, Receiver
from testbed import KINDS, PUBLISH_BATCH, SEED, Bed, Clubs, publish_one

LIGHT_EVENTS = 200
LIGHT_INTERVAL = 0.020  # seconds between events at light load
STALL_SECONDS = 20.0  # nothing new arrived for this long: the rest is lost
POLL_SECONDS = 0.05


@dataclass(frozen=True)
class Drain:
    """This run's deliveries that reached the receiver, and over how long."""

    expected: int
    seconds: float  # first arrival to last
    delivered: frozenset[str] = field(repr=False)  # the ids that arrived
    resent: int = 0  # other deliveries that arrived meanwhile (from earlier runs)
    cpu_seconds: float | None = None  # the senders' CPU time (user + system) meanwhile
    duplicates: int = 0  # arrivals of a delivery that had arrived before
    database_seconds: float | None = None  # the database's server processes' CPU time
    waited_seconds: float | None = None  # the senders' event loops waiting for a CPU
    inversions: int = 0  # arrivals after a higher sequence of their ordering key

    @property
    def rate(self) -> float:
        return len(self.delivered) / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_delivery(self) -> float | None:
        """The sender's CPU time per delivery, in µs: less sensitive to other load."""
        return self.per_delivery(self.cpu_seconds)

    def per_delivery(self, seconds: float | None) -> float | None:
        """One of this drain's times (``cpu_seconds``, …) per delivery, in µs."""
        if seconds is None or not self.delivered:
            return None
        return seconds / len(self.delivered) * 1e6

    @property
    def lost(self) -> int:
        return self.expected - len(self.delivered)


Expected = dict[str, set[str]]  # receiver role → delivery ids
Arrived = dict[str, dict[str, float]]  # receiver role → delivery id → first arrival


def wait_for(receiver: Receiver, expected: Expected, senders: Sequence[Process] = ()) -> Arrived:
    """Poll until every expected delivery has arrived, or nothing new has arrived for
    STALL_SECONDS; returns the arrivals."""
    seen, changed = -1, time.monotonic()
    while True:
        receiver.process.check()
        for sender in senders:
            sender.check()
        counts = receiver.counts()
        if all(counts.get(role, 0) >= len(ids) for role, ids in expected.items()):
            arrived = receiver.arrivals()
            if all(ids <= arrived.get(role, {}).keys() for role, ids in expected.items()):
                return arrived
        total = sum(counts.get(role, 0) for role in expected)
        if total != seen:
            seen, changed = total, time.monotonic()
        elif time.monotonic() - changed > STALL_SECONDS:
            return receiver.arrivals()
        time.sleep(POLL_SECONDS)


def drain_of(arrived: Arrived, expected: Expected) -> Drain:
    times = {
        delivery: at
        for role, ids in expected.items()
        for delivery, at in arrived.get(role, {}).items()
        if delivery in ids
    }
    others = sum(len(arrived.get(role, {}).keys() - ids) for role, ids in expected.items())
    seconds = max(times.values()) - min(times.values()) if times else 0.0
    total = sum(len(ids) for ids in expected.values())
    return Drain(total, seconds, frozenset(times), others)


def measure_drain(
    bed: Bed, receiver: Receiver, expected: Expected, senders: Sequence[Process]
) -> Drain:
    """Wait for the expected deliveries, with the duplicates and the inversions at the
    expected roles and what the senders and the database spent from now to then; the
    receiver was reset before."""
    pids = [sender.popen.pid for sender in senders]
    before = spent(pids, bed)
    drain = drain_of(wait_for(receiver, expected, senders), expected)
    duplicates, inversions = receiver.duplicates(), receiver.inversions()
    drain = dataclasses.replace(
        drain,
        duplicates=sum(duplicates.get(role, 0) for role in expected),
        inversions=sum(inversions.get(role, 0) for role in expected),
    )
    return spent(pids, bed).since(before, drain)


@dataclass(frozen=True)
class Spent:
    """Times so far, in seconds (None: unknown): the senders' CPU, their main threads'
    waits for a CPU, and the database's server processes' CPU by process (new ones since
    count from nothing)."""

    cpu: float | None
    waited: float | None
    database: dict[int, float] | None

    def since(self, before: Spent, drain: Drain) -> Drain:
        """``drain`` with what was spent between ``before`` and this."""
        database = None
        if self.database is not None and before.database is not None:
            earlier = before.database
            database = sum(cpu - earlier.get(pid, 0.0) for pid, cpu in self.database.items())
        return dataclasses.replace(
            drain,
            cpu_seconds=difference(self.cpu, before.cpu),
            waited_seconds=difference(self.waited, before.waited),
            database_seconds=database,
        )


def spent(pids: Sequence[int], bed: Bed | None = None) -> Spent:
    """What the processes ``pids`` and the database of ``bed`` (None: none) spent so far."""
    cpu = [process_cpu(pid) for pid in pids]
    waited = [process_waited(pid) for pid in pids]
    return Spent(total(cpu), total(waited), None if bed is None else database_cpu(bed))


def total(values: Sequence[float | None]) -> float | None:
    return None if None in values else sum(value for value in values if value is not None)


def difference(after: float | None, before: float | None) -> float | None:
    return None if after is None or before is None else after - before


# The bench's database's other server processes: the worker's connections (not this one).
_BACKENDS = text(
    "SELECT pid FROM pg_stat_activity "
    "WHERE datname = current_database() AND pid <> pg_backend_pid()"
)


def database_cpu(bed: Bed) -> dict[int, float] | None:
    """CPU seconds of PostgreSQL's backends serving the bench's database, by process; None
    on SQLite (it works inside the worker) or where unknown."""
    if bed.name != "postgresql":
        return None
    with bed.sessions() as session:
        pids = session.execute(_BACKENDS).scalars().all()
    found = {pid: process_cpu(pid) for pid in pids}
    return {pid: cpu for pid, cpu in found.items() if cpu is not None}


def process_waited(pid: int) -> float | None:
    """Seconds the process's main thread (its event loop) was runnable, waiting for a CPU
    (Linux's schedstat); None where unknown."""
    try:
        return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return None


def process_cpu(pid: int) -> float | None:
    """User plus system CPU seconds of a running process (Linux); None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def expected_deliveries(bed: Bed, clubs_: Clubs, since: datetime) -> Expected:
    """The healthy endpoints' deliveries created since ``since``, by receiver role."""
    query = select(Delivery.id, Delivery.endpoint_id).where(
        Delivery.created_at >= since, Delivery.endpoint_id.in_(clubs_.roles)
    )
    expected: Expected = {role: set() for role in clubs_.roles.values()}
    with bed.sessions() as session:
        for delivery_id, endpoint_id in session.execute(query):
            expected[clubs_.roles[endpoint_id]].add(delivery_id)
    return expected


def not_recorded(bed: Bed, delivered: frozenset[str]) -> int:
    """How many of these deliveries, which reached the receiver, the database does not show
    as succeeded (read after the worker stopped, so every attempt should be recorded)."""
    ids = sorted(delivered)
    succeeded = 0
    with bed.sessions() as session:
        for first in range(0, len(ids), PUBLISH_BATCH):
            query = select(func.count()).where(
                Delivery.id.in_(ids[first : first + PUBLISH_BATCH]),
                Delivery.status == Status.SUCCEEDED,
            )
            succeeded += session.scalar(query) or 0
    return len(ids) - succeeded


@dataclass(frozen=True)
class Light:
    """The light-load run: each event's latency in ms (None: it never arrived)."""

    latencies_ms: list[float | None]
    delivered: frozenset[str]


def light_load(bed: Bed, receiver: Receiver, club_id: str, sender: Process) -> Light:
    """Publish LIGHT_EVENTS events, one every LIGHT_INTERVAL, and wait for them."""
    receiver.reset()
    rng = random.Random(SEED + 1)
    committed: dict[str, float] = {}
    due = time.monotonic()
    for number in range(LIGHT_EVENTS):
        with bed.sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            event_id = publish_one(session, club, KINDS[number % len(KINDS)], rng)
        committed[event_id] = time.time()
        due += LIGHT_INTERVAL
        time.sleep(max(0.0, due - time.monotonic()))
    with bed.sessions() as session:
        query = select(Delivery.event_id, Delivery.id).where(Delivery.club_id == club_id)
        delivery_of = {event: delivery for event, delivery in session.execute(query)}
    arrived = wait_for(receiver, {LIGHT: set(delivery_of.values())}, [sender]).get(LIGHT, {})
    latencies = [
        (arrived[delivery_of[event]] - at) * 1000 if delivery_of[event] in arrived else None
        for event, at in committed.items()
    ]
    return Light(latencies, frozenset(arrived.keys() & set(delivery_of.values())))
