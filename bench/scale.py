"""Does finding and claiming due work cost the same at any backlog? The delivery engine at scale.

Every round, the worker leases the lanes of endpoints with due deliveries and claims a batch
for each (``claims.take_lanes`` then ``claims.claim``; ``look`` below is the one place that
names them, so that a redesigned queue is measured by changing that function only).
This script times that look, in the benchmark's process, on SQLite and on PostgreSQL (with
the worker's connection options), against a database that grows:

- **waiting work**: one dead endpoint of another club (a port nobody listens on) holds N
  deliveries due in two hours (pending, attempt 1: retries waiting for their turn), beside
  5 healthy endpoints with 20 due deliveries each; N = ``--sizes`` (10k, 100k, 1M). Each
  look runs in a transaction that is rolled back, so every look meets the same rows: a warm-up
  look, then ``--looks`` timed ones; the table gives the median and p95 in ms (and the median
  of the find alone), and the ratio of the largest size to the smallest;
- **idle CPU**: with nothing due, an idle ``clubwire serve`` on SQLite (its worker runs
  inside) and an idle ``clubwire worker`` on PostgreSQL, with 0 and each N waiting: its CPU
  time (user + system, from /proc) over 10 s of wall time after 2 s to settle, as % of a core;
- **due work**: a fresh database with the smallest and the largest size due now over 50
  endpoints (5 clubs of 10, each at the receiver of ``bench/delivery.py``): the look's time
  as above, then a ``clubwire worker`` drains for about 10 s, and deliveries/s is the middle
  80 % of the arrivals at the receiver over their time span (10k drain in a few seconds:
  neither the ramp-up nor the tail counts);
- **wide work**: a fresh database with ``--wide`` deliveries (10,000) due now over 50
  endpoints, and another with the same over 2,000 endpoints (5 each; clubs of 10), each
  drained by one ``clubwire worker`` as above until all arrived, in ``--wide-rounds`` (3)
  alternating rounds; the line ``wide 2000 change <±x.x> %`` is the median of the rounds'
  deliveries/s over 2,000 endpoints against over 50 (issue 38: within 20 %), beside the
  change in the worker's CPU a delivery (steadier on a busy machine). The 2,000
  endpoints share the receiver's 50 ports (a path each), so that the run measures the lanes
  leased, not 2,000 TLS handshakes more.

Deliveries are inserted with one SQL statement each (``testbed.bulk_deliveries``), each due
1 ms before the next as real retries are spread (one time for all would let PostgreSQL's
index deduplicate them into a few pages); on PostgreSQL the table is then vacuumed and
analysed, as autovacuum soon would be.

Targets (issue 12): a look with 1M waiting at most 2× its cost with 10k, on both databases;
with 1M due over 50 endpoints, deliveries/s within 20 % of the run with 10k due; idle serve
(SQLite) and worker (PostgreSQL) under 1 % of a core, also with 100k waiting. Issue 38: due
work over 2,000 endpoints within 20 % of the same over 50.

Run from the repository root: ``.venv/bin/python bench/scale.py [--database both]
[--sizes 10000,100000,1000000] [--looks 100] [--wide 10000] [--wide-rounds 3]
[--only waiting,due,wide]``.
About 5 minutes with the default sizes on this machine (2 cores), most of it on PostgreSQL;
PostgreSQL databases are made and dropped as in ``bench/delivery.py`` (``--postgres-url``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy.orm import Session

from clubwire.domain import timestamps
from clubwire.services.delivery import claims
from clubwire.settings import Settings
from clubwire.storage import database
from clubwire.storage.queue import Want
from clubwire.worker import lanes
from delivery import DATABASES, POSTGRES_URL
from harness import HOST, START_TIMEOUT, BenchError, Process, exit_status, free_ports
from measuring import process_cpu
from receiver import Receiver, start_receiver
from testbed import (
    Bed,
    Target,
    Tls,
    bulk_deliveries,
    dead_endpoint,
    delete_deliveries,
    make_tls,
    new_club,
    new_endpoint,
    prepare_bed,
    start_clubwire,
    wait_started,
    worker,
)

PROG = "bench/scale.py"
SIZES = (10_000, 100_000, 1_000_000)
LOOKS = 100  # a median of 20 moved 2× between runs on a noisy machine (ADR 0008 session 18)
HEALTHY, HEALTHY_DUE = 5, 20  # healthy endpoints, and due deliveries each
DUE_CLUBS, DUE_PER_CLUB = 5, 10  # 50 endpoints with due work
WIDE, WIDE_ENDPOINTS = 10_000, (50, 2000)  # due deliveries, over so many endpoints
WIDE_ROUNDS = 3
SCENARIOS = ("waiting", "due", "wide")
WAITING_IN, DUE_IN = timedelta(hours=2), timedelta(minutes=-1)
SETTLE_SECONDS, IDLE_SECONDS = 2.0, 10.0
DRAIN_SECONDS = 10.0
DRAIN_POLL = 0.25  # seconds between looks at the receiver's count, when a drain may end early
TARGET_LOOK_RATIO = 2.0
TARGET_DUE_CHANGE = 20.0  # per cent
TARGET_IDLE = 1.0  # per cent of a core


# -- the adapter: the worker's look, as the engine has it today -------------------------------


@dataclass(frozen=True)
class Look:
    find: float  # seconds to find the endpoints with due work
    total: float  # seconds to find and claim
    claimed: int


def look(session: Session, now: datetime, settings: Settings) -> Look:
    """Lease the lanes with due work and claim for each as much as a worker's lane takes,
    within what the worker holds in all (as ``worker.loop.Worker`` asks)."""
    rounds = lanes.backlog_rounds(settings) + 1
    room, lane = settings.max_in_flight * rounds, settings.max_in_flight_per_endpoint * rounds
    until = now + timedelta(seconds=settings.lease_seconds)
    start = time.perf_counter()
    leased = claims.take_lanes(session, now, until, "wkr_bench", max(1, room // lane))
    found = time.perf_counter()
    wants = {}
    for one in leased:
        if room <= 0:
            break
        wants[one.endpoint_id] = Want(one, min(lane, room), until)
        room -= wants[one.endpoint_id].count
    jobs = claims.claim(session, now, "wkr_bench", wants).jobs if wants else []
    return Look(found - start, time.perf_counter() - start, len(jobs))


# -- options ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    databases: list[str]
    sizes: list[int]
    looks: int
    postgres_url: str
    wide: int
    wide_rounds: int
    scenarios: list[str]


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    default_sizes = ",".join(map(str, SIZES))
    parser.add_argument("--sizes", default=default_sizes, help=f"waiting ({default_sizes})")
    parser.add_argument("--looks", type=int, default=LOOKS, help=f"timed looks ({LOOKS})")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    parser.add_argument("--wide", type=int, default=WIDE, help=f"wide work, due ({WIDE})")
    parser.add_argument(
        "--wide-rounds", type=int, default=WIDE_ROUNDS, help=f"of wide work ({WIDE_ROUNDS})"
    )
    default_scenarios = ",".join(SCENARIOS)
    parser.add_argument("--only", default=default_scenarios, help=f"of {default_scenarios}")
    args = parser.parse_args(argv)
    scenarios = [name for name in args.only.split(",") if name]
    if not scenarios or set(scenarios) - set(SCENARIOS):
        parser.error(f"--only takes some of {default_scenarios}, separated by commas")
    try:
        sizes = sorted({int(size) for size in args.sizes.split(",")})
    except ValueError:
        parser.error("--sizes must be whole numbers separated by commas")
    if sizes[0] < 1 or args.looks < 2 or args.wide < max(WIDE_ENDPOINTS) or args.wide_rounds < 1:
        parser.error(
            "--sizes and --wide-rounds must be at least 1, --looks at least 2, "
            f"--wide at least {max(WIDE_ENDPOINTS)}"
        )
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(
        databases, sizes, args.looks, args.postgres_url, args.wide, args.wide_rounds, scenarios
    )


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Row:
    """One size on one database: the looks, and the idle CPU or the drain's deliveries/s."""

    database: str
    size: int
    looks: list[Look] = field(default_factory=list)
    idle_cpu: float | None = None  # % of a core
    rate: float | None = None  # deliveries/s
    cpu: float | None = None  # the worker's CPU µs a delivery over its drain

    def median(self) -> float:
        return statistics.median(one.total for one in self.looks) * 1000

    def p95(self) -> float:
        return statistics.quantiles([one.total for one in self.looks], n=20)[18] * 1000

    def find(self) -> float:
        return statistics.median(one.find for one in self.looks) * 1000


def time_looks(bed: Bed, looks: int) -> list[Look]:
    """A warm-up look, then ``looks`` timed ones, each rolled back, through an engine set up
    as the worker's is."""
    engine = database.engine_for(bed.settings, worker=True)
    sessions = database.sessions(engine)
    timed = []
    try:
        for _ in range(looks + 1):
            with sessions() as session:
                timed.append(look(session, timestamps.utc_now(), bed.settings))
                session.rollback()
    finally:
        engine.dispose()
    return timed[1:]


def idle_cpu(bed: Bed, label: str) -> float:
    """% of a core that an idle ``clubwire serve`` (SQLite) or ``worker`` (PostgreSQL) uses."""
    with ExitStack() as stack:
        if bed.name == "sqlite":
            (port,) = free_ports(1)
            arguments = ["serve", "--host", HOST, "--port", str(port)]
            process = start_clubwire(stack, bed, arguments, label)
            wait_ready(process, port)
        else:
            process = start_clubwire(stack, bed, ["worker"], label)
            wait_started(process)
        time.sleep(SETTLE_SECONDS)
        return cpu_share(process, IDLE_SECONDS)


def cpu_share(process: Process, seconds: float) -> float:
    """The process's CPU time over ``seconds`` of wall time, as % of a core."""
    before, start = process_cpu(process.popen.pid), time.monotonic()
    time.sleep(seconds)
    after, elapsed = process_cpu(process.popen.pid), time.monotonic() - start
    process.check()
    if before is None or after is None:
        raise BenchError("no CPU time for the process (this needs Linux's /proc)")
    return (after - before) / elapsed * 100


def wait_ready(process: Process, port: int) -> None:
    """Until ``/readyz`` answers 200."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        process.check()
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/readyz", timeout=2) as answer:
                if answer.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.1)
    raise BenchError(f"clubwire serve was not ready within {START_TIMEOUT:.0f} s")


def drain(
    bed: Bed, receiver: Receiver, label: str, expected: int | None = None
) -> tuple[float, float]:
    """Deliveries/s of a worker draining for about DRAIN_SECONDS (or until ``expected``
    deliveries arrived): the middle 80 % of the arrivals over their time span, so that neither
    its start nor the end of a small backlog counts; and the worker's CPU µs a delivery
    arrived over the whole drain (steadier than the rate on a busy machine; its start-up
    apart)."""
    receiver.reset()
    with worker(bed, label) as process:
        wait_started(process)
        before, deadline = process_cpu(process.popen.pid), time.monotonic() + DRAIN_SECONDS
        while time.monotonic() < deadline:
            time.sleep(DRAIN_POLL)
            if expected is not None and sum(receiver.counts().values()) >= expected:
                break
        after = process_cpu(process.popen.pid)
        process.check()
    times = sorted(at for arrived in receiver.arrivals().values() for at in arrived.values())
    first, last = len(times) // 10, len(times) * 9 // 10
    seconds = times[last] - times[first] if last > first else 0.0
    spent = (after or 0.0) - (before or 0.0)
    return ((last - first) / seconds if seconds else 0.0), spent / max(1, len(times)) * 1e6


# -- the scenarios ----------------------------------------------------------------------------


def waiting(name: str, workdir: Path, tls: Tls, options: Options) -> list[Row]:
    """Idle with none waiting, then each size waiting at a dead endpoint: looks (with the
    healthy endpoints' due deliveries) and idle CPU (without them)."""
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / f"{name}-waiting", tls, options.postgres_url)
        healthy = targets(bed, ["granite"], HEALTHY, None)
        dead = dead_endpoint(bed)
        rows = [Row(name, 0, idle_cpu=idle_cpu(bed, "idle-0"))]
        loaded = 0
        for size in options.sizes:
            bulk_deliveries(bed, [dead], size - loaded, WAITING_IN, f"waiting{size}")
            loaded = size
            bulk_deliveries(bed, healthy, HEALTHY * HEALTHY_DUE, DUE_IN, "healthy")
            row = Row(name, size, time_looks(bed, options.looks))
            delete_deliveries(bed, "healthy")
            row.idle_cpu = idle_cpu(bed, f"idle-{size}")
            rows.append(row)
            print(f"  {DATABASES[name]} {size:,} waiting: {row.median():.2f} ms", flush=True)
        return rows


def due(name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options) -> list[Row]:
    """The smallest and the largest size due now over 50 endpoints, each in a database of
    its own: looks, then a worker's deliveries/s."""
    rows = []
    for size in sorted({options.sizes[0], options.sizes[-1]}):
        with ExitStack() as stack:
            folder = workdir / f"{name}-due-{size}"
            bed = prepare_bed(stack, name, folder, tls, options.postgres_url)
            slugs = [f"due-{n}" for n in range(DUE_CLUBS)]
            bulk_deliveries(bed, targets(bed, slugs, DUE_PER_CLUB, receiver), size, DUE_IN, "due")
            row = Row(name, size, time_looks(bed, options.looks))
            row.rate, row.cpu = drain(bed, receiver, f"due-{size}")
            rows.append(row)
            print(f"  {DATABASES[name]} {size:,} due: {row.median():.2f} ms", flush=True)
    return rows


def wide(name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options) -> list[Row]:
    """``--wide`` deliveries due now over each of ``WIDE_ENDPOINTS`` endpoints (in clubs of
    10), each in a database of its own, drained by a worker until all arrived; in
    ``--wide-rounds`` rounds, the widths in turn in each (so that the machine's speed, which
    moves between minutes, moves both). A row a drain: its size is the endpoints."""
    rows = []
    with ExitStack() as stack:
        beds = {}
        for count in WIDE_ENDPOINTS:
            folder = workdir / f"{name}-wide-{count}"
            bed = prepare_bed(stack, name, folder, tls, options.postgres_url)
            slugs = [f"wide-{n}" for n in range(count // DUE_PER_CLUB)]
            beds[count] = (bed, targets(bed, slugs, DUE_PER_CLUB, receiver))
        for round_ in range(options.wide_rounds):
            for count, (bed, found) in beds.items():
                bulk_deliveries(bed, found, options.wide, DUE_IN, f"wide{round_}")
                row = Row(name, count)
                row.rate, row.cpu = drain(bed, receiver, f"wide-{count}-{round_}", options.wide)
                rows.append(row)
                print(f"  {DATABASES[name]} {options.wide:,} due over {count:,}: {row.rate:,.0f}/s")
    return rows


def targets(bed: Bed, slugs: list[str], each: int, receiver: Receiver | None) -> list[Target]:
    """``each`` endpoints in each of these new clubs, at the receiver's roles d0, d1, … (past
    the last role, again from d0 on a path of their own; or, without a receiver, at a port
    nobody listens on: they are never sent to)."""
    found: list[Target] = []
    (closed,) = free_ports(1)
    roles = DUE_CLUBS * DUE_PER_CLUB
    with bed.sessions.begin() as session:
        for slug in slugs:
            club = new_club(session, slug)
            for _ in range(each):
                n = len(found)
                role = f"d{n % roles}"
                url = receiver.url(role) if receiver else f"https://{HOST}:{closed}/{role}"
                url += f"/{n}" if n >= roles else ""
                endpoint, _ = new_endpoint(session, bed, club, url)
                found.append(Target(club.id, endpoint.id))
    return found


# -- report -----------------------------------------------------------------------------------


def report_waiting(rows: list[Row]) -> None:
    print(
        f"\nwaiting work: one dead endpoint holding N deliveries due in 2 h, beside {HEALTHY} "
        f"healthy endpoints with {HEALTHY_DUE} due each; a look = take_lanes + claim "
        "(rolled back), ms; idle CPU: serve (SQLite) / worker (PostgreSQL), % of a core"
    )
    print(
        f"  {'database':<11} {'waiting':>10} {'median':>8} {'p95':>8} {'find':>8} {'idle CPU':>9}"
    )
    for row in rows:
        cpu = f"{row.idle_cpu:.1f} %" if row.idle_cpu is not None else "-"
        times = [f"{ms:>8.2f}" for ms in (row.median(), row.p95(), row.find())] if row.looks else []
        cells = " ".join(times or [f"{'-':>8}"] * 3)
        print(f"  {DATABASES[row.database]:<11} {row.size:>10,} {cells} {cpu:>9}")
    for name in DATABASES:
        looked = [row for row in rows if row.database == name and row.looks]
        if len(looked) > 1:
            ratio = looked[-1].median() / looked[0].median()
            target = f"target ≤ {TARGET_LOOK_RATIO:.0f}: {met(ratio <= TARGET_LOOK_RATIO)}"
            sizes = f"{short(looked[-1].size)}/{short(looked[0].size)}"
            print(f"  {DATABASES[name]} look ratio {sizes} {ratio:.2f}   ({target})")
        idle = [row.idle_cpu or 0.0 for row in rows if row.database == name]
        if idle:
            target = f"target < {TARGET_IDLE:.0f} %: {met(max(idle) < TARGET_IDLE)}"
            print(f"  {DATABASES[name]} idle CPU at most {max(idle):.1f} %   ({target})")


def report_due(rows: list[Row]) -> None:
    print(
        f"\ndue work over {DUE_CLUBS * DUE_PER_CLUB} endpoints: a look, ms; then one worker "
        f"draining for about {DRAIN_SECONDS:.0f} s, deliveries/s"
    )
    print(f"  {'database':<11} {'due':>10} {'median':>8} {'p95':>8} {'claimed':>8} {'/s':>9}")
    for row in rows:
        print(
            f"  {DATABASES[row.database]:<11} {row.size:>10,} {row.median():>8.2f} "
            f"{row.p95():>8.2f} {row.looks[0].claimed:>8} {row.rate or 0:>9,.0f}"
        )
    for name in DATABASES:
        pair = [row for row in rows if row.database == name]
        if len(pair) == 2 and pair[0].rate:
            ratio = pair[1].median() / pair[0].median()
            change = ((pair[1].rate or 0) / pair[0].rate - 1) * 100
            target = f"target within {TARGET_DUE_CHANGE:.0f} %: {met(change > -TARGET_DUE_CHANGE)}"
            sizes = f"{short(pair[1].size)}/{short(pair[0].size)}"
            print(
                f"  {DATABASES[name]} look ratio {sizes} {ratio:.2f}, deliveries/s change "
                f"{change:+.1f} %   ({target})"
            )


def report_wide(rows: list[Row], due: int) -> None:
    print(
        f"\nwide work: {due:,} deliveries due now, one worker draining them: deliveries/s, and "
        "the worker's CPU µs a delivery, by round"
    )
    narrow, widest = WIDE_ENDPOINTS
    for name in DATABASES:
        ours = [row for row in rows if row.database == name]
        if not ours:
            continue
        pairs = list(zip(ours[::2], ours[1::2], strict=True))
        for count, side in ((narrow, 0), (widest, 1)):
            rates = " · ".join(f"{pair[side].rate or 0:,.0f}" for pair in pairs)
            cpus = " · ".join(f"{pair[side].cpu or 0:.0f}" for pair in pairs)
            print(f"  {DATABASES[name]:<11} {count:>6,} endpoints  {rates} /s   {cpus} µs")
        changes = [((wide_.rate or 0) / (few.rate or 1) - 1) * 100 for few, wide_ in pairs]
        cpu = [((wide_.cpu or 0) / (few.cpu or 1) - 1) * 100 for few, wide_ in pairs]
        change = statistics.median(changes)
        by_round = " · ".join(f"{one:+.1f}" for one in changes)
        target = f"target within {TARGET_DUE_CHANGE:.0f} %: {met(change > -TARGET_DUE_CHANGE)}"
        print(
            f"  {DATABASES[name]} wide {widest} change {change:+.1f} %   ({target}; median of "
            f"rounds {by_round}; CPU a delivery {statistics.median(cpu):+.1f} %)"
        )


def short(size: int) -> str:
    """10k, 1M: sizes as the issue writes them."""
    if size >= 1_000_000 and size % 1_000_000 == 0:
        return f"{size // 1_000_000}M"
    return f"{size // 1000}k" if size >= 1000 and size % 1000 == 0 else str(size)


def met(done: bool) -> str:
    return "met" if done else "MISSED"


# -- main -------------------------------------------------------------------------------------


def bench(options: Options) -> bool:
    waiting_rows, due_rows, wide_rows = [], [], []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-scale-")))
        tls = make_tls(workdir)
        roles = [f"d{n}" for n in range(DUE_CLUBS * DUE_PER_CLUB)]
        receiver = start_receiver(stack, workdir, tls.server_pem, roles)
        for name in options.databases:
            if "waiting" in options.scenarios:
                waiting_rows += waiting(name, workdir, tls, options)
            if "due" in options.scenarios:
                due_rows += due(name, workdir, tls, receiver, options)
            if "wide" in options.scenarios:
                wide_rows += wide(name, workdir, tls, receiver, options)
    if waiting_rows:
        report_waiting(waiting_rows)
    if due_rows:
        report_due(due_rows)
    if wide_rows:
        report_wide(wide_rows, options.wide)
    return True


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
