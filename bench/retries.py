"""Are retries attempted on time, alone and beside a busy endpoint? (issue 31, item 5)

An attempt that failed at time T (its end, when the worker judges it) with schedule step S
makes its delivery due at T + S × (1 + 0.1 × draw) (``RetrySchedule``, DESIGN §6: never
earlier than the step, at most 10 % of it later). Issue 31 saw short retries start 0.75–1.7 s
after their step. This script measures, with real processes, when each retry starts:

- **quiet**: one endpoint whose receiver answers every request ``503`` (the receiver's
  failing role), ``--events`` events (4) published to it 0.25 s apart, beside an idle
  ``clubwire worker`` run with ``CLUBWIRE_RETRY_SCHEDULE`` = ``--schedule`` (1,1,1,1): each
  delivery goes through the whole schedule until it is dead;
- **busy**: the same, while another club's endpoint (answering 200) receives a steady stream
  of ``--rate`` events a second (200), published in a transaction every 0.1 s by a thread of
  this process (``testbed.publish_backlog``), so that the worker holds that lane turn after
  turn. The rate it reached is reported: on a loaded machine it may fall short. On SQLite,
  the stream's transactions and the worker's writes (its leases and records) take turns at
  the file's one write lock.

For each retry (attempt 2 on), lateness is its ``started_at`` (table ``attempts``) minus the
previous attempt's end (its ``started_at`` plus ``duration_ms``: the worker counts the step
from the moment the post ended) and the step; it may be up to the spread (10 % of the step)
plus 100 ms. Beside it, "past due" is the start minus the due time the worker recorded
(``deliveries.next_attempt_at``, which the next attempt overwrites: a trigger the bench adds
to its own database keeps each one), the draw left out: how long a due retry waited.

The report gives, per database and situation, each round (a fresh database each, the
situations in turn) and the median of the ``--rounds`` (3): the retries, lateness p50/p95/max
in ms, past due max, and how many were later than allowed; each round also says what share
of its time the worker's event loop was runnable yet waited for a CPU (``/proc``, as in
``bench/delivery.py``): a machine busy with other work makes every step late. Target (issue
31): none later than allowed. The exit status is non-zero when a retry was later than
allowed in any round, or one is missing.

Run from the repository root: ``.venv/bin/python bench/retries.py [--database postgresql]
[--events 4] [--schedule 1,1,1,1] [--rate 200] [--rounds 3]``: about a minute on PostgreSQL,
two with ``--database both``; PostgreSQL databases are made and dropped as in
``bench/delivery.py`` (``--postgres-url``). ``--events`` is at most 5: one more dead delivery
in a row and the endpoint would be switched off, its waiting deliveries skipped.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import random
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from sqlalchemy import Column, Integer, MetaData, String, Table, func, select, text

from clubwire.domain.delivering import DEAD_IN_A_ROW_LIMIT, SPREAD, Status
from clubwire.storage.models import Attempt, Delivery
from clubwire.storage.types import UTCDateTime
from harness import BenchError, Process, exit_status
from measuring import difference, process_waited
from receiver import FAILING, Receiver, healthy_roles, start_receiver
from testbed import (
    BUSY_CLUB,
    SEED,
    Bed,
    Target,
    Tls,
    make_tls,
    new_club,
    new_endpoint,
    prepare_bed,
    publish_backlog,
    wait_started,
    worker,
)

PROG = "bench/retries.py"
DATABASES = ("sqlite", "postgresql")
SITUATIONS = ("quiet", "busy")
POSTGRES_URL = os.environ.get(
    "CLUBWIRE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
FAILING_CLUB = "shale"
BUSY_ROLE = healthy_roles(1)[0]
MARGIN = 0.1  # seconds a retry may start after its step's spread
STAGGER = 0.25  # seconds between the failing endpoint's events
BATCH_SECONDS = 0.1  # the busy stream publishes a batch this often
SETTLE_SECONDS = 1.0  # the worker idles, or drains the stream, this long first
POLL_SECONDS = 0.1
DEAD_SLACK = 30.0  # seconds the deliveries may take to die beyond their schedule


@dataclass(frozen=True)
class Options:
    databases: list[str]
    events: int
    schedule: tuple[int, ...]
    rate: int
    rounds: int
    postgres_url: str


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="postgresql")
    parser.add_argument("--events", type=int, default=4, help="events to the failing one (4)")
    parser.add_argument("--schedule", default="1,1,1,1", help="retry steps, s (1,1,1,1)")
    parser.add_argument("--rate", type=int, default=200, help="busy events a second (200)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (3)")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    args = parser.parse_args(argv)
    try:
        schedule = tuple(int(step) for step in args.schedule.split(","))
    except ValueError:
        parser.error("--schedule: whole seconds separated by commas")
    if any(step < 0 for step in schedule):
        parser.error("--schedule: no step may be negative")
    if not 1 <= args.events <= DEAD_IN_A_ROW_LIMIT or min(args.rate, args.rounds) < 1:
        parser.error(f"--events between 1 and {DEAD_IN_A_ROW_LIMIT}, --rate, --rounds at least 1")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(databases, args.events, schedule, args.rate, args.rounds, args.postgres_url)


# -- the bed: a schedule, and every due time kept ---------------------------------------------

# Each retry's due time, as the worker records it on its delivery (for attempt ``number``).
DUE = Table(
    "bench_retry_due",
    MetaData(),
    Column("delivery_id", String(32)),
    Column("number", Integer),
    Column("due_at", UTCDateTime()),
)
_KEEP = "INSERT INTO bench_retry_due VALUES (NEW.id, NEW.attempt + 1, NEW.next_attempt_at)"
_RECORDED = "NEW.attempt > OLD.attempt AND NEW.next_attempt_at IS NOT NULL"
_KEEP_DUE = {
    "postgresql": [
        f"""CREATE FUNCTION bench_keep_due() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN {_KEEP}; RETURN NULL; END $$""",
        f"""CREATE TRIGGER bench_keep_due AFTER UPDATE OF next_attempt_at ON deliveries
            FOR EACH ROW WHEN ({_RECORDED}) EXECUTE FUNCTION bench_keep_due()""",
    ],
    "sqlite": [
        f"""CREATE TRIGGER bench_keep_due AFTER UPDATE OF next_attempt_at ON deliveries
            WHEN {_RECORDED} BEGIN {_KEEP}; END""",
    ],
}


def scheduled_bed(stack: ExitStack, name: str, workdir: Path, tls: Tls, options: Options) -> Bed:
    """A fresh bed whose worker runs the short schedule, keeping every due time."""
    bed = prepare_bed(stack, name, workdir, tls, options.postgres_url)
    with bed.sessions.begin() as session:
        DUE.create(session.connection())
        for statement in _KEEP_DUE[name]:
            session.execute(text(statement))
    schedule = ",".join(str(step) for step in options.schedule)
    return dataclasses.replace(bed, env={**bed.env, "CLUBWIRE_RETRY_SCHEDULE": schedule})


class Ends(NamedTuple):
    failing: Target  # answers 503
    busy: Target  # answers 200, to the steady stream


def seed_ends(bed: Bed, receiver: Receiver) -> Ends:
    """Two clubs, one endpoint each: an event to one is never delivered to the other."""
    with bed.sessions.begin() as session:
        failing_club, busy_club = new_club(session, FAILING_CLUB), new_club(session, BUSY_CLUB)
        failing, _ = new_endpoint(session, bed, failing_club, receiver.url(FAILING))
        busy, _ = new_endpoint(session, bed, busy_club, receiver.url(BUSY_ROLE))
        return Ends(Target(failing_club.id, failing.id), Target(busy_club.id, busy.id))


# -- publishing -------------------------------------------------------------------------------


@dataclass
class Stream:
    """A steady stream of events to one club, published by a thread of this process: a
    transaction of ``rate × BATCH_SECONDS`` events every BATCH_SECONDS (behind that pace,
    with no pause)."""

    bed: Bed
    club_id: str
    rate: int
    published: int = 0
    seconds: float = 0.0  # from its start to its end
    error: Exception | None = None
    stop: threading.Event = dataclasses.field(default_factory=threading.Event)

    def run(self) -> None:
        rng, batch = random.Random(SEED), max(1, round(self.rate * BATCH_SECONDS))
        started = due = time.monotonic()
        try:
            while not self.stop.wait(max(0.0, due - time.monotonic())):
                publish_backlog(self.bed, self.club_id, batch, rng)
                self.published += batch
                due += batch / self.rate
        except Exception as exc:  # told by ``streaming``, in the bench's thread
            self.error = exc
        self.seconds = time.monotonic() - started

    @property
    def achieved(self) -> float:
        """Events a second it published (on a busy machine, maybe fewer than asked)."""
        return self.published / self.seconds if self.seconds > 0 else 0.0


@contextmanager
def streaming(bed: Bed, club_id: str, rate: int) -> Iterator[Stream]:
    """``rate`` events a second to the club for the block (0: none)."""
    stream = Stream(bed, club_id, rate)
    thread = threading.Thread(target=stream.run, daemon=True)
    if rate:
        thread.start()
    try:
        yield stream
    finally:
        stream.stop.set()
        if rate:
            thread.join()
    if stream.error is not None:
        raise BenchError(f"the busy stream failed: {stream.error!r}")


def publish_failing(bed: Bed, club_id: str, events: int) -> None:
    """One event at a time, STAGGER apart, so that their retries fall at different moments."""
    rng = random.Random(SEED + 1)
    for number in range(events):
        if number:
            time.sleep(STAGGER)
        publish_backlog(bed, club_id, 1, rng)


def wait_dead(bed: Bed, endpoint_id: str, options: Options, process: Process) -> None:
    """Until none of the endpoint's deliveries is pending (each went through its schedule),
    or for as long as that may take with DEAD_SLACK to spare (the retries not made by then
    are reported missing)."""
    seconds = (1 + SPREAD) * sum(options.schedule) + STAGGER * options.events + DEAD_SLACK
    deadline = time.monotonic() + seconds
    query = select(func.count()).where(
        Delivery.endpoint_id == endpoint_id, Delivery.status == Status.PENDING
    )
    while time.monotonic() < deadline:
        process.check()
        with bed.sessions() as session:
            if not session.scalar(query):
                return
        time.sleep(POLL_SECONDS)


# -- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Retry:
    """One retry: its step, and how late it started, in ms."""

    step: int  # seconds
    late_ms: float  # after the previous attempt's end plus the step
    past_due_ms: float | None  # after the due time the worker recorded (None: not found)

    @property
    def allowed_ms(self) -> float:
        return (SPREAD * self.step + MARGIN) * 1000

    @property
    def too_late(self) -> bool:
        return self.late_ms > self.allowed_ms


class Tried(NamedTuple):
    number: int
    started_at: datetime
    duration_ms: int


def retries_of(bed: Bed, endpoint_id: str, schedule: tuple[int, ...]) -> list[Retry]:
    """Every retry of the endpoint's deliveries, from their recorded attempts."""
    query = (
        select(Attempt.delivery_id, Attempt.number, Attempt.started_at, Attempt.duration_ms)
        .join(Delivery, Delivery.id == Attempt.delivery_id)
        .where(Delivery.endpoint_id == endpoint_id)
        .order_by(Attempt.delivery_id, Attempt.number)
    )
    attempts: dict[str, list[Tried]] = {}
    with bed.sessions() as session:
        for delivery_id, number, started_at, duration_ms in session.execute(query):
            attempts.setdefault(delivery_id, []).append(Tried(number, started_at, duration_ms))
        due = {(d, n): at for d, n, at in session.execute(select(DUE))}
    return [
        retry_of(earlier, later, schedule, due.get((delivery_id, later.number)))
        for delivery_id, tried in attempts.items()
        for earlier, later in itertools.pairwise(tried)
    ]


def retry_of(
    earlier: Tried, later: Tried, schedule: tuple[int, ...], due: datetime | None
) -> Retry:
    step = schedule[earlier.number - 1]
    ended = earlier.started_at + timedelta(milliseconds=earlier.duration_ms)
    late = (later.started_at - ended).total_seconds() - step
    past_due = None if due is None else (later.started_at - due).total_seconds() * 1000
    return Retry(step, late * 1000, past_due)


@dataclass(frozen=True)
class Round:
    retries: list[Retry]
    expected: int  # events × steps
    busy_rate: float  # events a second the busy stream published (0: none)
    busy_arrived: int  # deliveries that reached the busy endpoint
    waited: float | None  # share of the time the worker's event loop waited for a CPU

    def quantile(self, share: float) -> float:
        ordered = sorted(retry.late_ms for retry in self.retries)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0

    @property
    def past_due_max(self) -> float:
        return max((r.past_due_ms for r in self.retries if r.past_due_ms is not None), default=0)

    @property
    def too_late(self) -> int:
        return sum(retry.too_late for retry in self.retries)

    @property
    def missing(self) -> int:
        return max(0, self.expected - len(self.retries))

    def line(self) -> str:
        busy = f"; busy: {self.busy_rate:.0f} events/s, {self.busy_arrived:,} arrived"
        missing = f", {self.missing} missing" if self.missing else ""
        waited = "" if self.waited is None else f"; worker waited for a CPU {self.waited:.0%}"
        return (
            f"{len(self.retries)} retries{missing}, late p50 {self.quantile(0.5):.0f} ms "
            f"p95 {self.quantile(0.95):.0f} ms max {self.quantile(1.0):.0f} ms, "
            f"past due max {self.past_due_max:.0f} ms, {self.too_late} later than allowed"
            f"{busy if self.busy_rate else ''}{waited}"
        )


def situation_round(
    name: str, situation: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options
) -> Round:
    """One situation in a fresh database: its retries, and the busy endpoint's arrivals."""
    rate = options.rate if situation == "busy" else 0
    with ExitStack() as stack:
        bed = scheduled_bed(stack, name, workdir, tls, options)
        ends = seed_ends(bed, receiver)
        receiver.reset()
        with worker(bed, situation) as process:
            wait_started(process)
            with streaming(bed, ends.busy.club_id, rate) as stream:
                time.sleep(SETTLE_SECONDS)
                before, since = process_waited(process.popen.pid), time.monotonic()
                publish_failing(bed, ends.failing.club_id, options.events)
                wait_dead(bed, ends.failing.endpoint_id, options, process)
                after, seconds = process_waited(process.popen.pid), time.monotonic() - since
        retries = retries_of(bed, ends.failing.endpoint_id, options.schedule)
    busy = receiver.counts().get(BUSY_ROLE, 0)
    waited = difference(after, before)
    share = None if waited is None else waited / seconds
    return Round(retries, options.events * len(options.schedule), stream.achieved, busy, share)


# -- the report -------------------------------------------------------------------------------


def report(name: str, situation: str, rounds: list[Round]) -> None:
    p50 = statistics.median(r.quantile(0.5) for r in rounds)
    p95 = statistics.median(r.quantile(0.95) for r in rounds)
    most = statistics.median(r.quantile(1.0) for r in rounds)
    past_due = statistics.median(r.past_due_max for r in rounds)
    late, count = sum(r.too_late for r in rounds), sum(len(r.retries) for r in rounds)
    print(
        f"{name} {situation}: median of rounds late p50 {p50:.0f} ms p95 {p95:.0f} ms "
        f"max {most:.0f} ms, past due max {past_due:.0f} ms; later than allowed {late} of {count}"
    )


def bench_database(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options
) -> bool:
    """Rounds of both situations in turn (so that the machine's speed, which moves between
    minutes, moves both); whether every retry was on time."""
    rounds: dict[str, list[Round]] = {situation: [] for situation in SITUATIONS}
    for round_ in range(options.rounds):
        for situation, done in rounds.items():
            where = workdir / f"{name}-{situation}-{round_}"
            done.append(situation_round(name, situation, where, tls, receiver, options))
            print(f"  {name} {situation} round {round_}: {done[-1].line()}")
    for situation, done in rounds.items():
        report(name, situation, done)
    return not any(r.too_late or r.missing for done in rounds.values() for r in done)


def bench(options: Options) -> bool:
    """Each database in turn; whether every retry was on time."""
    good = True
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-retry-")))
        tls = make_tls(workdir)
        receiver = start_receiver(stack, workdir, tls.server_pem, [FAILING, BUSY_ROLE])
        steps = ",".join(str(step) for step in options.schedule)
        print(
            f"{options.events} events to a 503 endpoint, schedule {steps} s, allowed "
            f"{SPREAD:.0%} of the step + {MARGIN * 1000:.0f} ms; busy: {options.rate} "
            f"events/s to another club; {options.rounds} rounds"
        )
        for name in options.databases:
            good = bench_database(name, workdir, tls, receiver, options) and good
    return good


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
