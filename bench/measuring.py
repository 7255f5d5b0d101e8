"""Measuring at the receiver: drains (deliveries/s, CPU time, losses) and light-load latency.

A drain counts only the deliveries the run expects (read from the database before it starts);
others that arrive meanwhile, sent again from earlier runs, are counted apart, and so are
duplicates (a delivery that arrived more than once, as when two workers both send it).
Deliveries/s is the number that arrived divided by the time from the first arrival to the last.
"""

from __future__ import annotations

import dataclasses
import os
import random
import resource
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select

from clubwire.domain.delivery_rules import Status
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

    @property
    def rate(self) -> float:
        return len(self.delivered) / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_delivery(self) -> float | None:
        """The sender's CPU time per delivery, in µs: less sensitive to other load."""
        if self.cpu_seconds is None or not self.delivered:
            return None
        return self.cpu_seconds / len(self.delivered) * 1e6

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


def measure_drain(receiver: Receiver, expected: Expected, senders: Sequence[Process]) -> Drain:
    """Wait for the expected deliveries, with the senders' CPU time from now to then and the
    duplicates at the expected roles; the receiver was reset before."""
    before = senders_cpu(senders)
    drain = drain_of(wait_for(receiver, expected, senders), expected)
    after = senders_cpu(senders)
    duplicates = receiver.duplicates()
    drain = dataclasses.replace(drain, duplicates=sum(duplicates.get(role, 0) for role in expected))
    if before is None or after is None:
        return drain
    return dataclasses.replace(drain, cpu_seconds=after - before)


def senders_cpu(senders: Sequence[Process]) -> float | None:
    """The processes' CPU seconds together; None where any is unknown."""
    each = [process_cpu(sender.popen.pid) for sender in senders]
    return None if None in each else sum(cpu for cpu in each if cpu is not None)


def process_cpu(pid: int) -> float | None:
    """User plus system CPU seconds of a running process (Linux); None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


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
