"""Does erasing a member of a club with a million events hold up delivery for other clubs?
(issue 34)

On each database (a SQLite file, and a fresh PostgreSQL database), club A gets ``--events``
events (1,000,000) and a small club a tenth as many, both loaded by set-based SQL, not the
publish path: realistic bodies made by ``event_catalog.envelope`` from a pool of sample
events (each of its kind's shape, with people of their own), copied under each row's id, and
the ``event_people`` digests of the people each carries (``personal_data.digests``); events
a minute apart over the history; every tenth event with a delivery (succeeded) and an
attempt whose excerpt is the receiver's echo of the body. In each club, one member per round
has ``--member-events`` events (2,000, fewer where the small club cannot hold them) spread
evenly over its history. Club B's endpoint points at the bare receiver (``bench/receiver.py``),
and one ``clubwire worker`` drains a backlog of B's deliveries (topped up each round, made in
one statement as ``testbed.bulk_deliveries`` makes them) from start to end.

Each round erases that round's member in the small club and then in club A
(``services.personal_data.erasures.erase``, by email, in its batches) and measures:

1. the erasure's wall time, and events erased per second;
2. B's deliveries/s at the receiver while club A's erasure runs, against the windows as long
   just before and just after it, which bracket it so that a machine whose speed drifts
   moves both sides: the ratio during / without is the "holding up" figure (1.0: not at all);
3. the erasure's time in the small club against club A's: finding a member's events reads
   their digests, not the club's history, so the two should be about the same (ratio ~1).

Each figure is the median of ``--rounds`` (3). The last line is ``erasure ratio <B's
deliveries/s during / without, the lower of the two databases>``. The exit status is non-zero
when an erasure missed one of the member's events.

Run from the repository root, on a quiet machine: ``.venv/bin/python bench/erasure.py
[--database sqlite|postgresql|both] [--events 1000000] [--rounds 3]``; a quick check:
``--events 50000 --rounds 1``.
"""

from __future__ import annotations

import argparse
import bisect
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import cast

import orjson
from sqlalchemy import TextClause, bindparam, func, select, text

from clubwire.domain import event_catalog, personal_data, timestamps
from clubwire.domain.delivering import Status, Trigger
from clubwire.services.personal_data import erasures
from clubwire.storage import queue
from clubwire.storage.models import Delivery
from clubwire.storage.types import UTCDateTime
from delivery import DATABASES, POSTGRES_URL
from harness import BenchError, exit_status
from receiver import Receiver, healthy_roles, start_receiver
from testbed import (
    SEED,
    Bed,
    Target,
    Tls,
    analyse,
    bulk_deliveries,
    make_tls,
    new_club,
    new_endpoint,
    prepare_bed,
    wait_started,
    worker,
)

PROG = "bench/erasure.py"
EVENTS = 1_000_000
MEMBER_EVENTS = 2_000
SMALL_SHARE = 10  # the small club holds a tenth of club A's events
POOL = 997  # sample events whose bodies the others copy (a prime: no stride lines up with it)
WITH_DELIVERY = 10  # every tenth event has a delivery and an attempt
LOAD_BATCH = 100_000  # events per loading transaction
BACKLOG = 300_000  # B's deliveries added before each round: a minute's worth, or more
FIRST_WINDOW = 3.0  # seconds of the window before the first erasure (later: the last one's)
PERSON_KINDS = ("registration.created", "member.updated", "practice_ice.booked")
ROLE = healthy_roles(1)[0]  # club B's endpoint at the receiver
START = datetime(2020, 1, 1, tzinfo=UTC)  # the clubs' first event; one a minute since
PLACEHOLDER = "evt_bench_placeholder"  # the id in a pool body, replaced by each row's
LARGE_CLUB, SMALL_CLUB, B_CLUB = "clubaa", "clubsmall", "clubb"
REQUESTED_BY = erasures.By.OPERATOR


# -- options ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    databases: list[str]
    events: int
    rounds: int
    member_events: int
    postgres_url: str

    @property
    def small(self) -> int:
        return self.events // SMALL_SHARE


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    parser.add_argument("--events", type=int, default=EVENTS, help=f"club A's events ({EVENTS})")
    parser.add_argument("--rounds", type=int, default=3, help="rounds, one member each (3)")
    parser.add_argument(
        "--member-events", type=int, default=MEMBER_EVENTS, help=f"each ({MEMBER_EVENTS})"
    )
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.member_events < 1:
        parser.error("--rounds and --member-events must be at least 1")
    # Each member's events sit at offsets 10, 20, … of a stride: it must hold them all.
    most = args.events // SMALL_SHARE // (WITH_DELIVERY * (args.rounds + 1))
    if most < 1:
        parser.error(f"--events is too few for {args.rounds} rounds")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    member_events = min(args.member_events, most)
    return Options(databases, args.events, args.rounds, member_events, args.postgres_url)


# -- loading a club ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Member:
    email: str
    member_id: str

    def wanted(self) -> personal_data.Wanted:
        return personal_data.Wanted(email=self.email)


def member(number: int) -> Member:
    """The member erased in round ``number``, the same in both clubs (their digests differ
    by club)."""
    return Member(f"erase.me.{number}@bench.example", f"mbr_erase_{number}")


@dataclass(frozen=True)
class Pool:
    """The bodies rows copy: ``POOL`` sample events, then each member's (one per kind that
    carries a person), by number; and the digests of the people each carries."""

    bodies: list[tuple[int, str, bytes]]  # number, kind, body with PLACEHOLDER as its id
    digests: list[tuple[int, str]]  # number, digest


def pool(club_id: str, to_erase: list[Member]) -> Pool:
    rng = random.Random(SEED)
    bodies, digests = [], []
    drawn = [event_catalog.SUBSCRIBABLE[k % len(event_catalog.SUBSCRIBABLE)] for k in range(POOL)]
    samples = [(kind, event_catalog.sample(kind, START, rng)) for kind in drawn]
    for erased in to_erase:
        for kind in PERSON_KINDS:
            data = event_catalog.sample(kind, START, rng)
            person = {"id": erased.member_id, "name": "Erin Erase", "email": erased.email}
            data["member"] = {**cast(dict[str, object], data["member"]), **person}
            samples.append((kind, data))
    for number, (kind, data) in enumerate(samples):
        payload = event_catalog.validate(kind, data)
        body = event_catalog.envelope(PLACEHOLDER, kind, START, club_id, payload)
        bodies.append((number, kind, body))
        people = personal_data.digests(club_id, kind, orjson.loads(body)["data"])
        digests += [(number, found) for found in people]
    return Pool(bodies, digests)


# Row n (1 … events) copies pool body number ``_BODY``: a member's at offsets 10, 20, …
# (``WITH_DELIVERY``, one member each) of every ``stride`` rows, the member's kinds in turn;
# else the sample n % POOL.
_BODY = """CASE WHEN s.n % :stride % :every = 0 AND s.n % :stride BETWEEN :every AND :last_offset
THEN :pool + (s.n % :stride / :every - 1) * :kinds + s.n / :stride % :kinds
ELSE s.n % :pool END"""
_SERIES = {
    "postgresql": "s(n) AS (SELECT generate_series(CAST(:first AS INT), CAST(:final AS INT)))",
    "sqlite": "s(n) AS (SELECT :first UNION ALL SELECT n + 1 FROM s WHERE n < :final)",
}
_BODY_WITH_ID = {
    "postgresql": "convert_to(replace(convert_from(p.body, 'UTF8'), :placeholder, {id}), 'UTF8')",
    "sqlite": "CAST(replace(CAST(p.body AS TEXT), :placeholder, {id}) AS BLOB)",
}
_BYTES = {"postgresql": "BYTEA", "sqlite": "BLOB"}
_POOL_TABLES = {
    "bench_pool": "number INTEGER, kind TEXT, body {bytes}",
    "bench_digests": "number INTEGER, digest TEXT",
}
_ECHO = {
    "postgresql": "substr(convert_from(e.body, 'UTF8'), 1, 1000)",
    "sqlite": "substr(CAST(e.body AS TEXT), 1, 1000)",
}
_MINUTES = {
    "postgresql": "CAST(:start AS TIMESTAMPTZ) + s.n * INTERVAL '1 minute'",
    "sqlite": "strftime('%Y-%m-%d %H:%M:%f', :start, '+' || s.n || ' minutes') || '000'",
}
_EVENTS = """WITH RECURSIVE {series}
INSERT INTO events (id, club_id, kind, body, created_at)
SELECT CAST(:prefix AS TEXT) || s.n, :club_id, p.kind, {body}, {created_at}
FROM s JOIN bench_pool p ON p.number = {number}"""
_PEOPLE = """WITH RECURSIVE {series}
INSERT INTO event_people (event_id, digest, club_id)
SELECT CAST(:prefix AS TEXT) || s.n, d.digest, :club_id
FROM s JOIN bench_digests d ON d.number = {number}"""
_DELIVERIES = """WITH RECURSIVE {series}
INSERT INTO deliveries (id, club_id, event_id, endpoint_id, status, attempt, next_trigger,
                        created_at, updated_at)
SELECT CAST(:delivery_prefix AS TEXT) || s.n, :club_id, CAST(:prefix AS TEXT) || s.n,
       :endpoint_id, :status, 1, :trigger, {created_at}, {created_at}
FROM s WHERE s.n % :every = 0"""
_ATTEMPTS = """WITH RECURSIVE {series}
INSERT INTO attempts (delivery_id, number, trigger, started_at, duration_ms, response_code,
                      excerpt)
SELECT d.id, 1, d.next_trigger, d.created_at, 5, 200, {echo}
FROM s JOIN deliveries d ON d.id = CAST(:delivery_prefix AS TEXT) || s.n
JOIN events e ON e.id = d.event_id
WHERE s.n % :every = 0"""


def load_club(bed: Bed, slug: str, events: int, options: Options) -> str:
    """A club of ``events`` events as the module docstring says; returns its id."""
    with bed.sessions.begin() as session:
        club = new_club(session, slug)
        endpoint, _ = new_endpoint(session, bed, club, f"https://127.0.0.1:9/{slug}")
        found = pool(club.id, [member(number) for number in range(options.rounds)])
        for table, columns in _POOL_TABLES.items():
            typed = columns.format(bytes=_BYTES[bed.name])
            session.execute(text(f"CREATE TABLE {table} ({typed})"))
        insert_pool = text("INSERT INTO bench_pool VALUES (:number, :kind, :body)")
        session.execute(insert_pool, [dict(zip(("number", "kind", "body"), row, strict=True))
                                      for row in found.bodies])  # fmt: skip
        insert_digests = text("INSERT INTO bench_digests VALUES (:number, :digest)")
        session.execute(insert_digests, [{"number": n, "digest": d} for n, d in found.digests])
    parameters: dict[str, object] = {
        "stride": events // options.member_events,
        "last_offset": WITH_DELIVERY * options.rounds,
        "pool": POOL,
        "every": WITH_DELIVERY,
        "kinds": len(PERSON_KINDS),
        "placeholder": PLACEHOLDER,
        "start": START,
        "prefix": f"evt_{slug}_",
        "delivery_prefix": f"dlv_{slug}_",
        "club_id": club.id,
        "endpoint_id": endpoint.id,
        "status": Status.SUCCEEDED.value,
        "trigger": Trigger.SCHEDULED.value,
    }
    for first in range(1, events + 1, LOAD_BATCH):
        with bed.sessions.begin() as session:
            final = min(events, first + LOAD_BATCH - 1)
            for statement in statements(bed.name):
                session.execute(statement, parameters | {"first": first, "final": final})
    with bed.sessions.begin() as session:
        for table in _POOL_TABLES:
            session.execute(text(f"DROP TABLE {table}"))
    analyse(bed, "events, event_people, deliveries, attempts")
    return club.id


def statements(database: str) -> Iterator[TextClause]:
    """The loading statements of one batch, in the database's dialect."""
    series, created_at = _SERIES[database], _MINUTES[database]
    body = _BODY_WITH_ID[database].format(id="CAST(:prefix AS TEXT) || s.n")
    for template in (_EVENTS, _PEOPLE, _DELIVERIES, _ATTEMPTS):
        sql = template.format(
            series=series, body=body, created_at=created_at, number=_BODY, echo=_ECHO[database]
        )
        statement = text(sql)
        if ":start" in sql:
            statement = statement.bindparams(bindparam("start", type_=UTCDateTime()))
        yield statement


def club_b(bed: Bed, receiver: Receiver) -> Target:
    """Club B, whose one endpoint is the receiver's."""
    with bed.sessions.begin() as session:
        club = new_club(session, B_CLUB)
        endpoint, _ = new_endpoint(session, bed, club, receiver.url(ROLE))
        return Target(club.id, endpoint.id)


def member_rows(events: int, options: Options, member: int) -> int:
    """How many of a club's ``events`` rows are the ``member``-th member's."""
    return len(range(WITH_DELIVERY * (member + 1), events + 1, events // options.member_events))


# -- measuring --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timed:
    """One erasure: when it started and ended (``time.time()``, the receiver's clock), the
    events it erased and the rows of each table it changed."""

    started: float
    ended: float
    events: int
    described: dict[str, object]

    @property
    def seconds(self) -> float:
        return self.ended - self.started


def timed_erasure(bed: Bed, slug: str, erased: Member) -> Timed:
    started = time.time()
    done = erasures.erase(bed.sessions, slug, erased.wanted(), timestamps.utc_now, REQUESTED_BY)
    return Timed(started, time.time(), done.counts.events, asdict(done.counts))


@dataclass(frozen=True)
class Round:
    """One round: both erasures, and B's deliveries/s during club A's and beside it."""

    small: Timed
    large: Timed
    during: float
    without: float

    @property
    def ratio(self) -> float:
        return self.during / self.without if self.without else 0.0


def one_round(bed: Bed, receiver: Receiver, b: Target, number: int, window: float) -> Round:
    """Top B's backlog up, erase the round's member in the small club, then measure B's
    deliveries for ``window`` seconds, during club A's erasure, and for as long after it."""
    top_up(bed, b, f"b{number}")
    receiver.reset()
    small = timed_erasure(bed, SMALL_CLUB, member(number))
    before = time.time()
    time.sleep(window)
    large = timed_erasure(bed, LARGE_CLUB, member(number))
    time.sleep(large.seconds)
    after = time.time()
    arrived = sorted(receiver.arrivals().get(ROLE, {}).values())
    if not still_due(bed, b):
        raise BenchError(f"club B's backlog ran out in round {number + 1}: raise BACKLOG")
    beside = arrivals(arrived, before, large.started) + arrivals(arrived, large.ended, after)
    without = beside / (large.started - before + after - large.ended)
    during = arrivals(arrived, large.started, large.ended) / large.seconds
    return Round(small, large, during, without)


def top_up(bed: Bed, b: Target, label: str) -> None:
    """``BACKLOG`` more of B's deliveries, due now, and the workers told, as a publish
    tells them."""
    bulk_deliveries(bed, [b], BACKLOG, timedelta(0), label)
    with bed.sessions.begin() as session:
        connection = session.connection()
        queue.on(connection).mark_due(connection, [b.endpoint_id], timestamps.utc_now())


def arrivals(times: list[float], start: float, end: float) -> int:
    """How many of the sorted ``times`` fall in [start, end)."""
    return bisect.bisect_left(times, end) - bisect.bisect_left(times, start)


def still_due(bed: Bed, b: Target) -> bool:
    query = select(func.count()).where(
        Delivery.endpoint_id == b.endpoint_id, Delivery.next_attempt_at.is_not(None)
    )
    with bed.sessions() as session:
        return bool(session.scalar(query))


# -- one database -----------------------------------------------------------------------------


@dataclass
class Outcome:
    database: str
    load_seconds: float
    rounds: list[Round] = field(default_factory=list)
    missed: int = 0  # the members' events an erasure did not erase

    @property
    def ratio(self) -> float:
        return statistics.median(r.ratio for r in self.rounds)


def bench_database(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options
) -> Outcome:
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / name, tls, options.postgres_url)
        started = time.monotonic()
        load_club(bed, SMALL_CLUB, options.small, options)
        load_club(bed, LARGE_CLUB, options.events, options)
        outcome = Outcome(name, time.monotonic() - started)
        b = club_b(bed, receiver)
        wait_started(stack.enter_context(worker(bed, name)))
        window = FIRST_WINDOW
        for number in range(options.rounds):
            done = one_round(bed, receiver, b, number, window)
            outcome.rounds.append(done)
            expected = (member_rows(n, options, number) for n in (options.small, options.events))
            outcome.missed += sum(expected) - done.small.events - done.large.events
            window = done.large.seconds
    return outcome


# -- report -----------------------------------------------------------------------------------


def report_setup(options: Options) -> None:
    print(
        f"erasure: club A of {options.events:,} events and a small club of {options.small:,}, "
        f"one a minute; each round erases a member with {options.member_events:,} events in "
        f"each (spread over the history; every {WITH_DELIVERY}th event with a delivery and an "
        "attempt echoing it); median of "
        f"{options.rounds} round(s)"
    )
    print(
        "club B: one endpoint at the bare receiver, one worker draining a backlog of "
        f"{BACKLOG:,} more deliveries each round; B's deliveries/s during club A's erasure "
        "against the windows just before and after it"
    )


def report(outcome: Outcome, options: Options) -> None:
    o = outcome
    large = [r.large.seconds for r in o.rounds]
    small = [r.small.seconds for r in o.rounds]
    rates = [r.large.events / r.large.seconds for r in o.rounds if r.large.seconds]
    flat = statistics.median(large) / statistics.median(small)
    rows = [
        ("erasure, club A", f"{statistics.median(large):.2f} s", f"runs {shown(large, 's')}"),
        ("events erased/s", f"{statistics.median(rates):,.0f}", f"runs {shown(rates, '/s')}"),
        ("erasure, small club", f"{statistics.median(small):.2f} s", f"runs {shown(small, 's')}"),
        ("club A / small club", f"{flat:.2f}", f"{options.events:,} / {options.small:,} events: "
         "~1 when finding the member's events reads no history"),
        ("B's deliveries/s, beside", f"{statistics.median(r.without for r in o.rounds):,.0f}",
         f"runs {shown([r.without for r in o.rounds], '/s')}"),
        ("B's deliveries/s, during", f"{statistics.median(r.during for r in o.rounds):,.0f}",
         f"runs {shown([r.during for r in o.rounds], '/s')}"),
        ("during / beside", f"{o.ratio:.2f}", f"by round {shown([r.ratio for r in o.rounds])}"),
        ("missed", f"{o.missed:,}", "of the members' events, not erased"),
    ]  # fmt: skip
    print(f"\n{DATABASES[o.database]} (clubs loaded in {o.load_seconds:,.0f} s)")
    for label, value, note in rows:
        print(f"  {label:<25} {value:>10}   {note}")
    print(f"  {'club A erasure changed':<25} {o.rounds[-1].large.described}")


def shown(values: list[float], unit: str = "") -> str:
    return " · ".join(f"{value:,.2f}" if value < 10 else f"{value:,.0f}" for value in values) + (
        f" {unit}" if unit else ""
    )


def bench(options: Options) -> bool:
    """Measure each database and report; whether every member's event was erased."""
    outcomes = []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-erase-")))
        tls = make_tls(workdir)
        receiver = start_receiver(stack, workdir, tls.server_pem, [ROLE])
        report_setup(options)
        for name in options.databases:
            outcomes.append(bench_database(name, workdir, tls, receiver, options))
            report(outcomes[-1], options)
    print(f"erasure ratio {min(o.ratio for o in outcomes):.2f}")
    return not any(o.missed for o in outcomes)


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
