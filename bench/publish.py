"""How much does publishing an event cost, measured against writing its rows bare?

Every club event the host platform sends (``POST /internal/v1/clubs/{slug}/events``, or up to
100 at once to ``…/events/batch``) is a call of ``services.delivery.events.publish``: it
validates the data against the event catalog, serialises the envelope, stores the event and
one delivery per subscribed endpoint, and marks each endpoint's queue head due (which wakes
the workers). The script measures it twice, each time against a **bare** writer in the same
run, on each database.

**In this process**: ``events.publish``, one event a transaction, against the very same rows
(made beforehand by ``bare_publisher.rows``: the envelope serialised, the ids made) inserted
with two SQLAlchemy Core statements and committed, which is what any design must pay the
database for an event and its deliveries. Rounds alternate between the two; each round
publishes ``--events`` events of every kind in turn (sample data drawn beforehand) to a club
with ``--endpoints`` endpoints subscribed to every kind, and, once timed, deletes what it
published, so that every round meets the same tables. The ratio ours/bare is events/s of ours
over events/s of bare (best round of each, and the median of each round's ratio): 0.5 means
our own work (validation, serialising, the subscribers' read, the heads) costs as much as
writing the rows. CPU per event is this process's (the database's server processes apart, on
PostgreSQL).

**Over HTTP**: a real ``clubwire serve`` (on SQLite the script holds the worker lock, so that
serve runs no worker: delivering has its own benchmark) against the bare publisher
(``bare_publisher.py``), a Starlette app served as serve is (uvicorn, uvloop, httptools, the
writes in the thread pool on the engine clubwire makes) that takes the same bodies and writes
the same rows for them in one transaction a request, and does nothing else: no token, no
validation, no club or subscribers read, no heads. That is the honest floor over HTTP: what
HTTP, JSON and the inserts cost any design on this machine, so that ours/bare prices our own
work there too (the in-process bare writer would leave HTTP's cost in ours' share). Both
take single events (one a request) and batches of 100, from each of ``--clients`` client
processes (``http_publishing``: forked once, one keep-alive connection each, ``http.client``;
their CPU time per event is reported, to show they are not what limits the server) for
``--seconds`` a run; each run's events are deleted after it. Requests carry no idempotency
key, as the rounds in this process; ``--http-rounds`` rounds, best run of each shown. A
request answered 503 (on SQLite, a writer that waited for the database's one write lock past
its busy timeout) is waited out as its ``Retry-After`` says and counted (column ``503s``):
only events answered 201 count.

Then ``--backlog N`` deliveries waiting for a retry (due in two hours) are loaded for the same
endpoints, and ours runs again in this process: publishing must not slow down as a failing
receiver's backlog grows (a line ``backlog <N> change <±x.x> %``).

The report gives, per database, the in-process figures, the backlog's change, and a line per
run over HTTP: ``http <database> <single|batch> <clients> ours <events/s> bare <events/s>
ratio <ours/bare>``. Then issue 38's targets over HTTP on PostgreSQL (single events ≥ 498/s
and batches ≥ 3,000 events/s from one client; 16 clients at least as many events/s as 4),
each ``target … (met|MISSED)``. The last line is ``ratio <in-process ours/bare, the lower of
the two databases>``.

Run from the repository root: ``.venv/bin/python bench/publish.py [--database
sqlite|postgresql|both] [--events 1000] [--endpoints 5] [--rounds 5] [--backlog 1000000]
[--clients 1,4,16] [--seconds 3] [--http-rounds 2]`` (``--clients 0``: no runs over HTTP);
about three to four minutes per database with the defaults on this machine (2 cores), most
of it loading the backlog and the runs over HTTP. PostgreSQL databases are made and dropped as
in ``bench/delivery.py`` (``--postgres-url``).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from multiprocessing.pool import Pool
from pathlib import Path

from sqlalchemy import delete

import bare_publisher
import http_publishing
from clubwire.domain import event_catalog, timestamps
from clubwire.services import clubs
from clubwire.services.delivery import events
from clubwire.storage import tables
from clubwire.worker import lock
from delivery import DATABASES, POSTGRES_URL, Runs
from harness import exit_status
from testbed import KINDS, SEED, Bed, Target, bulk_deliveries, make_tls, new_club, prepare_bed
from testbed import new_endpoint as add_endpoint

PROG = "bench/publish.py"
EVENTS, ENDPOINTS, ROUNDS, BACKLOG = 1000, 5, 5, 1_000_000
CLUBS, SECONDS, HTTP_ROUNDS = (1, 4, 16), 3.0, 2
WAITING_IN = timedelta(hours=2)
WARMED_SINCE = datetime(2000, 1, 1, tzinfo=UTC)  # forget everything published so far
TARGET_BACKLOG_CHANGE = 5.0  # per cent
# Issue 38's targets over HTTP on PostgreSQL: events/s of single publishes and of batches of
# 100 with one client; and more clients must not get fewer events through than 4 do.
TARGET_SINGLE, TARGET_BATCH = 498, 3000

Samples = Sequence[tuple[str, dict[str, object]]]  # an event's kind and its data


@dataclass(frozen=True)
class Options(Runs):
    clients: tuple[int, ...]  # client counts of the runs over HTTP (none: no such runs)
    seconds: float  # one run over HTTP
    http_rounds: int


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    parser.add_argument("--events", type=int, default=EVENTS, help=f"a round ({EVENTS})")
    parser.add_argument("--endpoints", type=int, default=ENDPOINTS, help=f"({ENDPOINTS})")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"({ROUNDS})")
    parser.add_argument("--backlog", type=int, default=BACKLOG, help=f"waiting ({BACKLOG})")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    parser.add_argument(
        "--clients",
        type=_counts,
        default=CLUBS,
        help=f"client counts over HTTP, such as 1,4,16 ({','.join(map(str, CLUBS))}; 0: no HTTP)",
    )
    parser.add_argument("--seconds", type=float, default=SECONDS, help=f"an HTTP run ({SECONDS})")
    parser.add_argument("--http-rounds", type=int, default=HTTP_ROUNDS, help=f"({HTTP_ROUNDS})")
    values = vars(parser.parse_args(argv))  # the options' names, but one
    if min(values["events"], values["endpoints"], values["rounds"]) < 1 or values["backlog"] < 0:
        parser.error("--events, --endpoints and --rounds are at least 1, --backlog at least 0")
    if values["seconds"] <= 0 or values["http_rounds"] < 1:
        parser.error("--seconds is more than 0, --http-rounds at least 1")
    if values["clients"] and values["events"] < http_publishing.BATCH_SIZE:
        parser.error(f"--events is at least {http_publishing.BATCH_SIZE} for the runs over HTTP")
    database = values.pop("database")
    return Options(databases=list(DATABASES) if database == "both" else [database], **values)


def _counts(text: str) -> tuple[int, ...]:
    counts = tuple(int(part) for part in text.split(",") if part.strip())
    if any(count < 0 for count in counts):
        raise argparse.ArgumentTypeError("client counts are 0 or more")
    return tuple(count for count in counts if count)


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
    forget(bed, club_id, since)
    return spent


def forget(bed: Bed, club_id: str, since: datetime) -> None:
    """Delete the club's events and deliveries made ``since``."""
    with bed.sessions.begin() as session:
        for table in (tables.deliveries, tables.events):  # deliveries first: they refer
            mine = (table.c.club_id == club_id) & (table.c.created_at >= since)
            session.execute(delete(table).where(mine))


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
    rows = [bare_publisher.rows(club_id, endpoint_ids, kind, data, now) for kind, data in samples]

    def publish_all() -> None:
        for event, deliveries in rows:
            with bed.sessions.begin() as session:
                session.execute(bare_publisher.ADD_EVENT, event)
                session.execute(bare_publisher.ADD_DELIVERIES, deliveries)

    return timed(bed, club_id, now, publish_all, len(rows))


# -- the runs ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class OverHttp:
    """The runs of one load (single events or batches) with one number of clients."""

    kind: str
    clients: int
    ours: list[http_publishing.Run] = field(default_factory=list)
    bare: list[http_publishing.Run] = field(default_factory=list)

    def best(self, runs: list[http_publishing.Run]) -> float:
        return max(run.rate() for run in runs)

    def ratio(self) -> float:
        return self.best(self.ours) / self.best(self.bare)

    def unavailable(self, runs: list[http_publishing.Run]) -> int:
        return sum(run.unavailable for run in runs)


@dataclass(frozen=True)
class Result:
    database: str
    ours: list[Round]
    bare: list[Round]
    backlog: list[Round]
    http: list[OverHttp]

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

    def over_http(self, kind: str, clients: int) -> float | None:
        found = [runs for runs in self.http if (runs.kind, runs.clients) == (kind, clients)]
        return found[0].best(found[0].ours) if found else None


def run(name: str, workdir: Path, options: Options, pool: Pool | None) -> Result:
    rng = random.Random(SEED)
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / name, make_tls(workdir), options.postgres_url)
        with bed.sessions.begin() as session:
            club = new_club(session, "granite")
            endpoint_ids = [
                add_endpoint(session, bed, club, f"https://127.0.0.1:{9000 + n}/hooks")[0].id
                for n in range(options.endpoints)
            ]
            club_id, slug = club.id, club.slug
        samples = make_samples(options.events, rng)
        ours(bed, club_id, samples[: max(1, options.events // 10)])  # warm up
        ours_rounds, bare_rounds = [], []
        for _ in range(options.rounds):
            ours_rounds.append(ours(bed, club_id, samples))
            bare_rounds.append(bare(bed, club_id, endpoint_ids, samples))
        http = []
        if pool is not None:
            with ExitStack() as serving:
                serving.enter_context(lock.single_worker(bed.settings))  # serve: no worker
                servers = http_publishing.start_servers(serving, bed, slug, club_id, endpoint_ids)
                http = over_http(bed, club_id, servers, pool, samples, options)
        backlog_rounds = []
        if options.backlog:
            targets = [Target(club_id, endpoint_id) for endpoint_id in endpoint_ids]
            bulk_deliveries(bed, targets, options.backlog, WAITING_IN, "waiting")
            backlog_rounds = [ours(bed, club_id, samples) for _ in range(options.rounds)]
    return Result(name, ours_rounds, bare_rounds, backlog_rounds, http)


def over_http(
    bed: Bed,
    club_id: str,
    servers: http_publishing.Servers,
    pool: Pool,
    samples: Samples,
    options: Options,
) -> list[OverHttp]:
    """Each load with each number of clients, ours then bare, ``--http-rounds`` times; what
    a run wrote is deleted after it, as after a round in this process."""
    loads = http_publishing.loads(samples)
    for kind, load in loads.items():  # a first request of each: warm, and answered 201
        for target in (servers.ours, servers.bare):
            http_publishing.check(target, kind, load)
    forget(bed, club_id, WARMED_SINCE)
    found = [OverHttp(kind, clients) for kind in loads for clients in options.clients]
    for _ in range(options.http_rounds):
        for runs in found:
            for target, into in ((servers.ours, runs.ours), (servers.bare, runs.bare)):
                since = timestamps.utc_now()
                load = loads[runs.kind]
                into.append(
                    http_publishing.drive(
                        pool, target, runs.kind, load, runs.clients, options.seconds
                    )
                )
                forget(bed, club_id, since)
    return found


# -- the report -------------------------------------------------------------------------------


def report(result: Result, options: Options) -> None:
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
    report_http(result)


LOADS = {http_publishing.SINGLE: "single events", http_publishing.BATCH: "batches of 100"}


def report_http(result: Result) -> None:
    if not result.http:
        return
    print(
        "  over HTTP, events/s    ours      bare   ours/bare   clients' CPU µs/event   503s"
        "   (best of the runs; 503s: all runs, ours / bare)"
    )
    for runs in result.http:
        clients = f"{runs.clients} client{'s' if runs.clients > 1 else ''}"
        cpu = min(run.client_cpu_per_event() for run in runs.ours + runs.bare)
        refused = f"{runs.unavailable(runs.ours)} / {runs.unavailable(runs.bare)}"
        print(
            f"  {LOADS[runs.kind]:<15} {clients:<10}"
            f"{runs.best(runs.ours):>7,.0f} {runs.best(runs.bare):>9,.0f} "
            f"{runs.ratio():>10.2f} {cpu:>14.0f} {refused:>14}"
        )
    for runs in result.http:
        print(
            f"http {result.database} {runs.kind} {runs.clients} ours "
            f"{runs.best(runs.ours):.0f} bare {runs.best(runs.bare):.0f} ratio {runs.ratio():.2f}"
        )


def targets(result: Result) -> Iterator[str]:
    """Issue 38's targets over HTTP, on PostgreSQL: each with what was measured."""
    single, batch = http_publishing.SINGLE, http_publishing.BATCH
    checks = [
        (
            f"single events, 1 client ≥ {TARGET_SINGLE}/s",
            result.over_http(single, 1),
            TARGET_SINGLE,
        ),
        (f"batches, 1 client ≥ {TARGET_BATCH:,}/s", result.over_http(batch, 1), TARGET_BATCH),
        (
            "single events, 16 clients ≥ 4 clients",
            result.over_http(single, 16),
            result.over_http(single, 4),
        ),
    ]
    for what, measured, wanted in checks:
        if measured is not None and wanted is not None:
            verdict = "met" if measured >= wanted else "MISSED"
            yield f"target {what}: {measured:,.0f} ({verdict})"


def bench(options: Options) -> bool:
    print(
        f"publishing: {options.events:,} events a round to {options.endpoints} endpoints "
        f"({options.events * options.endpoints:,} deliveries), one transaction an event, in "
        f"this process; ours = events.publish, bare = the same rows made beforehand, two "
        f"inserts; {options.rounds} alternating rounds"
    )
    if options.clients:
        print(
            f"over HTTP: clubwire serve (ours) against the bare publisher (bare_publisher.py), "
            f"{', '.join(map(str, options.clients))} client processes, {options.seconds:g} s "
            f"a run, {options.http_rounds} rounds"
        )
    results = []
    with ExitStack() as stack:
        pool = http_publishing.processes(stack, max(options.clients)) if options.clients else None
        workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-publish-"))
        for name in options.databases:
            results.append(run(name, Path(workdir), options, pool))
            report(results[-1], options)
    for result in results:
        if result.database == "postgresql":
            for line in targets(result):
                print(line)
    print(f"ratio {min(result.ratio() for result in results):.2f}")
    return True


if __name__ == "__main__":
    sys.exit(exit_status(PROG, lambda: bench(parse_options(sys.argv[1:]))))
