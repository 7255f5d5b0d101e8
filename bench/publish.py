"""How much does publishing an event cost, measured against writing its rows bare?

Every club event the host platform sends (``POST /internal/v1/clubs/{slug}/events``) is one
call of ``services.delivery.events.publish`` in a transaction of its own: it validates the data
against the event catalog, serialises the envelope, stores the event and one delivery per
subscribed endpoint, and marks each endpoint's queue head due (which wakes the workers).
This script times that call in the benchmark's process, one event per transaction, against
a **bare** writer in the same run: the very same rows (the envelope serialised beforehand,
the ids made beforehand) inserted with two SQLAlchemy Core statements and committed, which
is what any design must pay the database for an event and its deliveries. Rounds alternate
between the two; each round publishes ``--events`` events of every kind in turn (sample data
drawn beforehand) to a club with ``--endpoints`` endpoints subscribed to every kind, and,
once timed, deletes what it published, so that every round meets the same tables.

The ratio ours/bare is events/s of ours over events/s of bare (best round of each, and the
median of each round's ratio): 0.5 means our own work (validation, serialising, the
subscribers' read, the heads) costs as much as writing the rows. Then ``--backlog N``
deliveries waiting for a retry (due in two hours) are loaded for the same endpoints, and ours
runs again: publishing must not slow down as a failing receiver's backlog grows (a line
``backlog <N> change <±x.x> %``). CPU per event is this process's (the database's server
processes apart, on PostgreSQL). The last line is ``ratio <ours/bare>``.

Run from the repository root: ``.venv/bin/python bench/publish.py [--database
sqlite|postgresql|both] [--events 1000] [--endpoints 5] [--rounds 5] [--backlog 1000000]``;
about a minute per database with the defaults on this machine (2 cores), most of it loading
the backlog. PostgreSQL databases are made and dropped as in ``bench/delivery.py``
(``--postgres-url``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import delete, insert

from clubwire import ids
from clubwire.domain import event_catalog, timestamps
from clubwire.domain.delivering import Status, Trigger
from clubwire.services import clubs
from clubwire.services.delivery import events
from clubwire.storage import tables
from delivery import DATABASES, POSTGRES_URL, Runs
from harness import exit_status
from testbed import KINDS, SEED, Bed, Target, bulk_deliveries, make_tls, new_club, prepare_bed
from testbed import new_endpoint as add_endpoint

PROG = "bench/publish.py"
EVENTS, ENDPOINTS, ROUNDS, BACKLOG = 1000, 5, 5, 1_000_000
WAITING_IN = timedelta(hours=2)
TARGET_BACKLOG_CHANGE = 5.0  # per cent

Samples = Sequence[tuple[str, object]]  # an event's kind and its data


def parse_options(argv: list[str] | None) -> Runs:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    parser.add_argument("--events", type=int, default=EVENTS, help=f"a round ({EVENTS})")
    parser.add_argument("--endpoints", type=int, default=ENDPOINTS, help=f"({ENDPOINTS})")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"({ROUNDS})")
    parser.add_argument("--backlog", type=int, default=BACKLOG, help=f"waiting ({BACKLOG})")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    values = vars(parser.parse_args(argv))  # the options' names, but one
    if min(values["events"], values["endpoints"], values["rounds"]) < 1 or values["backlog"] < 0:
        parser.error("--events, --endpoints and --rounds are at least 1, --backlog at least 0")
    database = values.pop("database")
    return Runs(databases=list(DATABASES) if database == "both" else [database], **values)


# -- the two writers --------------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    seconds: float  # wall time for the round's events
    cpu: float  # this process's CPU time for them
    events: int

    def rate(self) -> float:
        return self.events / self.seconds

    def cpu_per_event(self) -> float:
        return self.cpu / self.events * 1e6


def make_samples(count: int, rng: random.Random) -> Samples:
    """``count`` events' kinds and sample data, every kind in turn."""
    now = timestamps.utc_now()
    kinds = (KINDS[n % len(KINDS)] for n in range(count))
    return [(kind, event_catalog.sample(kind, now, rng)) for kind in kinds]


def timed(
    bed: Bed, club_id: str, since: datetime, publish_all: Callable[[], None], count: int
) -> Round:
    """Time ``publish_all``, then delete the club's events and deliveries made ``since``:
    every round meets the same tables (else each would meet the rows of all rounds before it,
    and run a little slower than the last)."""
    start, cpu = time.perf_counter(), time.process_time()
    publish_all()
    spent = Round(time.perf_counter() - start, time.process_time() - cpu, count)
    with bed.sessions.begin() as session:
        for table in (tables.deliveries, tables.events):  # deliveries first: they refer
            mine = (table.c.club_id == club_id) & (table.c.created_at >= since)
            session.execute(delete(table).where(mine))
    return spent


def ours(bed: Bed, club_id: str, samples: Samples) -> Round:
    """``events.publish`` for each sample, a transaction each, as the internal API calls it."""
    since = timestamps.utc_now()

    def publish_all() -> None:
        for kind, data in samples:
            with bed.sessions.begin() as session:
                club = clubs.get_club_by_id(session, club_id)
                events.publish(session, club, kind, data, timestamps.utc_now())

    return timed(bed, club_id, since, publish_all, len(samples))


def bare(bed: Bed, club_id: str, endpoint_ids: list[str], samples: Samples) -> Round:
    """The same rows, made beforehand, in two Core statements a transaction."""
    now = timestamps.utc_now()
    rows = []
    for kind, data in samples:
        event_id = ids.new_id("evt")
        body = event_catalog.envelope(
            event_id, kind, now, club_id, event_catalog.validate(kind, data)
        )
        event = {"id": event_id, "club_id": club_id, "kind": kind, "body": body, "created_at": now}
        deliveries = [
            {
                "id": ids.new_sorted_id("dlv", now),
                "club_id": club_id,
                "event_id": event_id,
                "endpoint_id": endpoint_id,
                "status": Status.PENDING.value,
                "attempt": 0,
                "next_attempt_at": now,
                "next_trigger": Trigger.SCHEDULED.value,
                "created_at": now,
                "updated_at": now,
            }
            for endpoint_id in endpoint_ids
        ]
        rows.append((event, deliveries))
    add_event, add_deliveries = insert(tables.events), insert(tables.deliveries)

    def publish_all() -> None:
        for event, deliveries in rows:
            with bed.sessions.begin() as session:
                session.execute(add_event, event)
                session.execute(add_deliveries, deliveries)

    return timed(bed, club_id, now, publish_all, len(rows))


# -- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    database: str
    ours: list[Round]
    bare: list[Round]
    backlog: list[Round]

    def ratio(self) -> float:
        return max(r.rate() for r in self.ours) / max(r.rate() for r in self.bare)

    def by_round(self) -> float:
        return statistics.median(
            o.rate() / b.rate() for o, b in zip(self.ours, self.bare, strict=True)
        )

    def backlog_change(self) -> float | None:
        if not self.backlog:
            return None
        return (max(r.rate() for r in self.backlog) / max(r.rate() for r in self.ours) - 1) * 100


def run(name: str, workdir: Path, options: Runs) -> Result:
    rng = random.Random(SEED)
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / name, make_tls(workdir), options.postgres_url)
        with bed.sessions.begin() as session:
            club = new_club(session, "granite")
            endpoint_ids = [
                add_endpoint(session, bed, club, f"https://127.0.0.1:{9000 + n}/hooks")[0].id
                for n in range(options.endpoints)
            ]
            club_id = club.id
        samples = make_samples(options.events, rng)
        ours(bed, club_id, samples[: max(1, options.events // 10)])  # warm up
        ours_rounds, bare_rounds = [], []
        for _ in range(options.rounds):
            ours_rounds.append(ours(bed, club_id, samples))
            bare_rounds.append(bare(bed, club_id, endpoint_ids, samples))
        backlog_rounds = []
        if options.backlog:
            targets = [Target(club_id, endpoint_id) for endpoint_id in endpoint_ids]
            bulk_deliveries(bed, targets, options.backlog, WAITING_IN, "waiting")
            backlog_rounds = [ours(bed, club_id, samples) for _ in range(options.rounds)]
    return Result(name, ours_rounds, bare_rounds, backlog_rounds)


# -- the report -------------------------------------------------------------------------------


def report(result: Result, options: Runs) -> None:
    def rates(rounds: list[Round]) -> str:
        return " · ".join(f"{r.rate():,.0f}" for r in rounds)

    def best(rounds: list[Round]) -> str:
        return f"{max(r.rate() for r in rounds):>9,.0f}"

    def cpu(rounds: list[Round]) -> float:
        return min(r.cpu_per_event() for r in rounds)

    print(f"\n{DATABASES[result.database]}")
    print(f"  events/s, ours        {best(result.ours)}   runs {rates(result.ours)} /s")
    print(f"  events/s, bare        {best(result.bare)}   runs {rates(result.bare)} /s")
    print(f"  ratio ours/bare       {result.ratio():>9.2f}   best of each")
    print(f"  ratio, by round       {result.by_round():>9.2f}   median of each round's ours / bare")
    print(
        f"  CPU µs per event   {cpu(result.ours):>6.0f} / {cpu(result.bare):.0f}   "
        "ours / bare, this process (least of the rounds)"
    )
    change = result.backlog_change()
    if change is not None:
        waiting = f"+{options.backlog:,} waiting"
        print(f"  {waiting:<21} {best(result.backlog)}   runs {rates(result.backlog)} /s")
        target = f"target > −{TARGET_BACKLOG_CHANGE:.0f} %"
        verdict = "met" if change > -TARGET_BACKLOG_CHANGE else "MISSED"
        print(f"backlog {options.backlog} change {change:+.1f} %   ({target}: {verdict})")


def bench(options: Runs) -> bool:
    print(
        f"publishing: {options.events:,} events a round to {options.endpoints} endpoints "
        f"({options.events * options.endpoints:,} deliveries), one transaction an event, in "
        f"this process; ours = events.publish, bare = the same rows made beforehand, two "
        f"inserts; {options.rounds} alternating rounds"
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="clubwire-publish-") as workdir:
        for name in options.databases:
            results.append(run(name, Path(workdir), options))
            report(results[-1], options)
    print(f"ratio {min(result.ratio() for result in results):.2f}")
    return True


if __name__ == "__main__":
    sys.exit(exit_status(PROG, lambda: bench(parse_options(sys.argv[1:]))))
