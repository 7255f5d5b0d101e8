"""What does tracing cost? Publishing, the club API and delivery with tracing off and on.

Issue 36: with the OTEL variables set, every publish, every API request and every attempt
(its HTTP request and its record too) is a span, sent in batches over OTLP/HTTP by
OpenTelemetry's SDK. This script measures each of three hot paths with tracing off and with
tracing on (``OTEL_TRACES_SAMPLER=always_on``: every trace sampled; the SDK's defaults
otherwise), on SQLite and on PostgreSQL, in alternating runs (off, on, off, on, …; one pair
a round, ``--rounds``), and reports the median of each round's on/off ratio:

- **publish**: ``events.publish`` in this process, one event a transaction, ``--events``
  events a round to a club with ``--endpoints`` endpoints, timed as ``bench/publish.py``
  times ours (``publish.ours``: what it wrote is deleted after each round); events/s, and
  this process's CPU time per event (all its threads: the SDK's exporter thread is one).
  With tracing on, this process is traced (``tracing.start("bench")``) for the round, and its
  last spans are sent (``tracing.stop``) after the timing;
- **api**: ``GET /clubs/granite/api/v1/programs`` (the club API, 50 programs, as
  ``bench/api.py`` serves it, on a database of its own), one ``clubwire serve`` process a run,
  started with or without the variables, warmed up for 2 s, then driven by wrk for
  ``--seconds`` with ``--connections``; requests/s, the server's CPU time per request and
  wrk's p99. The server is stopped with SIGINT (``stop_sending``), and sends its last
  spans as it stops;
- **delivery**: ``--events`` events published to the busy club's ``--endpoints`` healthy
  endpoints while no worker runs (with tracing on, published traced, so that every attempt
  continues its event's trace, as behind a traced platform), then one ``clubwire worker``
  process, started with or without the variables, drains them into ``bench/receiver.py``,
  as ``bench/delivery.py`` measures (``drain_backlog``): deliveries/s from the first arrival
  to the last, and the worker's CPU time per delivery.

The collector is ``bench/otlp_collector.py``, started by this script in a process of its own
(its CPU is not the measured process's, but it is the machine's: on two cores it takes a
share from the runs with tracing on, so the CPU per unit is the steadier figure for the
traced process's own cost). It answers 200 to every export and counts the spans by the
exporting process's role and the span's name; each run's spans are read after its traced
process stopped (which sends what waits). The runs are in the order delivery, API,
publish; within a round, off before on. Each table shows the spans received in the runs
with tracing on against those expected (one ``publish`` per event; one server span per
request wrk completed, its warm-up's and the readiness check's, so a few more arrive: those
in flight when wrk stopped; one ``deliver``, ``POST`` and ``record`` per delivery, and the
backlog's ``publish`` spans): fewer means the SDK dropped some (its queue was full, or the
process ended before sending them). The runs with tracing off must send none.

The last lines are ``tracing <publish|api|delivery> ratio <on/off>`` (the lower of the
databases, two decimals; below 1 is what tracing costs), and ``tracing spans <received>
dropped <n>``. The exit status is non-zero when a delivery was lost or a run with tracing
off sent spans.

Run from the repository root: ``.venv/bin/python bench/tracing.py [--database
sqlite|postgresql|both] [--rounds 3] [--events 2000] [--endpoints 5] [--seconds 5]
[--connections 64] [--parts publish,api,delivery]``; about two minutes a database with the
defaults on this machine (2 cores; 4.5 minutes for both). Needs wrk (for the API) and the
otel extra (in dev). PostgreSQL databases are made and dropped as in ``bench/delivery.py``
(``--postgres-url``).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import random
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from api import (
    WARMUP_SECONDS,
    Target,
    child_environment,
    problems,
    run_wrk,
    start_ours,
    url_of,
    wait_ready,
)
from api import seed as seed_api
from clubwire import tracing
from clubwire.domain import timestamps
from delivery import DATABASES, POSTGRES_URL, drain_backlog
from harness import STOP_TIMEOUT, BenchError, Process, exit_status, free_ports
from measuring import process_cpu
from otlp_collector import Collector, start_collector
from publish import make_samples, ours
from receiver import Receiver, busy_roles, healthy_roles, start_receiver
from testbed import (
    SEED,
    Bed,
    Clubs,
    Tls,
    database_url,
    make_tls,
    prepare_bed,
    publish_backlog,
    seed,
    switch_neighbour,
)

PROG = "bench/tracing.py"
PARTS = ("publish", "api", "delivery")
EVENTS, ENDPOINTS, ROUNDS, SECONDS, CONNECTIONS = 2000, 5, 3, 5, 64
SERVE_STOP_TIMEOUT = 3 * STOP_TIMEOUT  # uvicorn's shutdown, then the last spans (5 s at most)


@dataclass(frozen=True)
class Options:
    databases: list[str]
    parts: list[str]
    rounds: int
    events: int
    endpoints: int
    seconds: int
    connections: int
    postgres_url: str
    collector_down: bool = False


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"off/on pairs ({ROUNDS})")
    parser.add_argument(
        "--events", type=int, default=EVENTS, help=f"a publish round, a delivery backlog ({EVENTS})"
    )
    parser.add_argument("--endpoints", type=int, default=ENDPOINTS, help=f"({ENDPOINTS})")
    parser.add_argument("--seconds", type=int, default=SECONDS, help=f"a wrk run ({SECONDS})")
    parser.add_argument(
        "--connections", type=int, default=CONNECTIONS, help=f"wrk's ({CONNECTIONS})"
    )
    parser.add_argument("--parts", default=",".join(PARTS), help="some of: " + ",".join(PARTS))
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    parser.add_argument(
        "--collector-down",
        action="store_true",
        help="traced processes send where nothing listens: what a collector that is down costs",
    )
    args = parser.parse_args(argv)
    parts = [part for part in args.parts.split(",") if part]
    if not parts or set(parts) - set(PARTS):
        parser.error(f"--parts: some of {', '.join(PARTS)}, separated by commas")
    if min(args.rounds, args.events, args.endpoints, args.seconds, args.connections) < 1:
        parser.error("--rounds, --events, --endpoints, --seconds and --connections: at least 1")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(
        databases,
        [part for part in PARTS if part in parts],
        args.rounds,
        args.events,
        args.endpoints,
        args.seconds,
        args.connections,
        args.postgres_url,
        args.collector_down,
    )


# -- tracing on and off -----------------------------------------------------------------------


def environment(base: Mapping[str, str], collector: Collector | None) -> dict[str, str]:
    """``base`` without any OTEL_* variable, plus the collector's (None: tracing off)."""
    env = {name: value for name, value in base.items() if not name.startswith("OTEL_")}
    return env if collector is None else env | collector.environment()


@contextmanager
def traced_here(collector: Collector | None) -> Iterator[None]:
    """This process traced for the block, into ``collector`` (None: untraced); its last
    spans are sent when the block ends. The SDK reads its variables from ``os.environ``."""
    if collector is None:
        yield
        return
    variables = collector.environment()
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        if not tracing.start("bench"):
            raise BenchError("tracing did not start in the bench's process")
        try:
            yield
        finally:
            tracing.stop()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


# -- runs -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Measured:
    """What a run measured: units (events, requests, deliveries) a second, the measured
    process's CPU seconds for them, and the spans it should have sent (``<role> <kind>`` →
    at least this many; none with tracing off)."""

    rate: float
    units: int
    cpu_seconds: float | None
    expected: dict[str, int]
    lost: int = 0  # deliveries that never arrived
    p99_ms: float | None = None  # the latency's 99th percentile, where the load generator tells


@dataclass(frozen=True)
class Run:
    measured: Measured
    spans: dict[str, int]  # what the collector received for the run, by ``<role> <kind>``
    collector_seconds: float | None  # the collector's CPU time for the run

    def per_unit(self, seconds: float | None) -> float | None:
        """CPU seconds per unit, in µs."""
        units = self.measured.units
        return None if seconds is None or not units else seconds / units * 1e6

    @property
    def received(self) -> int:
        return sum(self.spans.values())

    @property
    def dropped(self) -> int:
        """Spans expected that the collector did not receive."""
        expected = self.measured.expected.items()
        return sum(max(0, count - self.spans.get(kind, 0)) for kind, count in expected)


Body = Callable[[Collector | None, str], Measured]  # a run, traced into the collector or not


def run_once(collector: Collector, traced: bool, body: Body, label: str) -> Run:
    """One run of ``body``, with the spans the collector received for it and its CPU time."""
    collector.reset()
    pid = collector.process.popen.pid
    before = process_cpu(pid)
    measured = body(collector if traced else None, label)
    after = process_cpu(pid)
    spent = None if before is None or after is None else after - before
    return Run(measured, collector.counts().spans, spent)


@dataclass
class Part:
    """One hot path's runs on one database, by round."""

    name: str
    rate_unit: str  # "events/s"
    unit: str  # "event"
    cpu_of: str  # whose CPU time is measured
    off: list[Run] = field(default_factory=list)
    on: list[Run] = field(default_factory=list)

    def measure(self, collector: Collector, rounds: int, body: Body) -> Part:
        for round_ in range(rounds):
            self.off.append(run_once(collector, False, body, f"off-{round_}"))
            self.on.append(run_once(collector, True, body, f"on-{round_}"))
        return self

    def ratios(self) -> list[float]:
        """Each round's rate with tracing on over the rate with it off."""
        pairs = zip(self.on, self.off, strict=True)
        return [on.measured.rate / off.measured.rate for on, off in pairs if off.measured.rate]

    def ratio(self) -> float:
        ratios = self.ratios()
        return statistics.median(ratios) if ratios else 0.0

    def cpu_ratios(self) -> list[float]:
        """Each round's CPU per unit with tracing on over the CPU per unit with it off."""
        found = []
        for on, off in zip(self.on, self.off, strict=True):
            traced = on.per_unit(on.measured.cpu_seconds)
            untraced = off.per_unit(off.measured.cpu_seconds)
            if traced is not None and untraced:
                found.append(traced / untraced)
        return found

    @property
    def lost(self) -> int:
        return sum(run.measured.lost for run in [*self.off, *self.on])


# -- the three hot paths ----------------------------------------------------------------------


def publishing(bed: Bed, clubs_: Clubs, collector: Collector, options: Options) -> Body:
    """Runs of ``publish.ours`` on the busy club, traced in this process or not; warmed up
    both ways first (traced: the SDK's imports and first spans)."""
    samples = make_samples(options.events, random.Random(SEED))
    for warming in (None, collector):
        with traced_here(warming):
            ours(bed, clubs_.busy_id, samples[: max(1, options.events // 10)])

    def body(collector: Collector | None, _: str) -> Measured:
        with traced_here(collector):
            done = ours(bed, clubs_.busy_id, samples)
        expected = {} if collector is None else {"bench publish": done.events}
        return Measured(done.rate(), done.events, done.cpu, expected)

    return body


@dataclass(frozen=True)
class ApiBed:
    """The club API's database (a club of 50 programs), its servers' environment, its key."""

    workdir: Path
    env: dict[str, str]
    key: str


def api_bed(stack: ExitStack, name: str, workdir: Path, postgres_url: str) -> ApiBed:
    """A database of its own for the club API, seeded as ``bench/api.py`` seeds it."""
    home = workdir / f"api-{name}"
    home.mkdir()
    url = database_url(stack, name, home, postgres_url)
    secret_key = secrets.token_urlsafe(30)
    key = seed_api(url, home, secret_key)
    return ApiBed(home, child_environment(home, secret_key, url), key)


def serving(api: ApiBed, options: Options) -> Body:
    """Runs of wrk against a ``clubwire serve`` process of their own, traced or not."""

    def body(collector: Collector | None, label: str) -> Measured:
        with ExitStack() as stack:
            (port,) = free_ports(1)
            env = environment(api.env, collector)
            log = f"serve-{label}.log"
            server = start_ours(stack, env, api.workdir, port, log, SERVE_STOP_TIMEOUT)
            target = Target(url_of(port))
            wait_ready(server, target.url, api.key)
            warm = run_wrk(target, api.key, WARMUP_SECONDS, options.connections)
            before = process_cpu(server.popen.pid)
            run = run_wrk(target, api.key, options.seconds, options.connections)
            after = process_cpu(server.popen.pid)
            stop_sending(server)
        for warning in problems({f"serve ({label})": [warm, run]}):
            print(warning)
        requests = 1 + warm.requests + run.requests  # the readiness check's, the warm-up's
        expected = {} if collector is None else {"serve GET": requests}
        cpu = None if before is None or after is None else after - before
        return Measured(run.requests_per_second, run.requests, cpu, expected, p99_ms=run.p99_ms)

    return body


def stop_sending(server: Process) -> None:
    """Stop ``clubwire serve`` with SIGINT, so that it sends its last spans: after its
    graceful shutdown, uvicorn raises a SIGTERM it caught again, which ends the process
    before ``tracing.stop`` runs (its last batch, up to 511 spans, is lost), whereas the
    SIGINT it raises again is caught (``server.run``)."""
    server.popen.send_signal(signal.SIGINT)
    try:
        server.popen.wait(server.stop_timeout)
    except subprocess.TimeoutExpired:
        server.stop()


def delivering(bed: Bed, receiver: Receiver, clubs_: Clubs, options: Options) -> Body:
    """Runs of a backlog published (traced or not) and drained by a worker (traced or not)."""

    def body(collector: Collector | None, label: str) -> Measured:
        since = timestamps.utc_now()
        rng = random.Random(f"{SEED}-tracing-{label.rpartition('-')[2]}")  # the same both ways
        with traced_here(collector):
            publish_backlog(bed, clubs_.busy_id, options.events, rng)
        traced = dataclasses.replace(bed, env=environment(bed.env, collector))
        drain = drain_backlog(traced, receiver, clubs_, since, label)
        delivered = len(drain.delivered)
        expected = {f"worker {kind}": delivered for kind in ("deliver", "POST", "record")}
        expected["bench publish"] = options.events
        expected = {} if collector is None else expected
        return Measured(drain.rate, delivered, drain.cpu_seconds, expected, drain.lost)

    return body


# -- one database -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    database: str
    parts: list[Part]


def bench_database(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, collector: Collector, options: Options
) -> Result:
    """The parts asked for, in turn: delivery, the API, publishing (last: it leaves the busy
    club's queue heads due on rows it deleted)."""
    parts = []
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / name, tls, options.postgres_url)
        clubs_ = seed(bed, receiver, healthy_roles(options.endpoints))
        switch_neighbour(bed, clubs_, None)
        if "delivery" in options.parts:
            part = Part("delivery", "deliveries/s", "delivery", "the worker")
            body = delivering(bed, receiver, clubs_, options)
            parts.append(part.measure(collector, options.rounds, body))
        if "api" in options.parts:
            part = Part("api", "requests/s", "request", "the server")
            body = serving(api_bed(stack, name, workdir, options.postgres_url), options)
            parts.append(part.measure(collector, options.rounds, body))
        if "publish" in options.parts:
            part = Part("publish", "events/s", "event", "this process")
            body = publishing(bed, clubs_, collector, options)
            parts.append(part.measure(collector, options.rounds, body))
    order = {part: number for number, part in enumerate(PARTS)}
    return Result(DATABASES[name], sorted(parts, key=lambda part: order[part.name]))


# -- the report -------------------------------------------------------------------------------

TITLES = {"publish": "publish", "api": "API GET", "delivery": "delivery"}


def median_of(values: Iterable[float | None]) -> float | None:
    found = [value for value in values if value is not None]
    return statistics.median(found) if found else None


def number(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:,.1f}" if value < 100 and value != int(value) else f"{value:,.0f}"


def shown(values: list[float]) -> str:
    return " · ".join(f"{value:.2f}" for value in values)


def part_rows(part: Part) -> Iterator[tuple[str, float | None, float | None, str]]:
    """(what, off, on, notes) rows of one part: medians of its runs."""

    def medians(value: Callable[[Run], float | None]) -> tuple[float | None, float | None]:
        return median_of(map(value, part.off)), median_of(map(value, part.on))

    rates = " · ".join(
        f"{off.measured.rate:,.0f}/{on.measured.rate:,.0f}"
        for off, on in zip(part.off, part.on, strict=True)
    )
    ratios = f"on/off {part.ratio():.2f} (rounds {shown(part.ratios())}; off/on {rates})"
    yield (part.rate_unit, *medians(lambda run: run.measured.rate), ratios)
    cpu = part.cpu_ratios()
    cpu_note = f"on/off {statistics.median(cpu):.2f} (rounds {shown(cpu)})" if cpu else "unknown"
    yield (
        f"CPU µs/{part.unit}",
        *medians(lambda run: run.per_unit(run.measured.cpu_seconds)),
        f"{cpu_note}: {part.cpu_of}",
    )
    yield (
        "collector µs",
        *medians(lambda run: run.per_unit(run.collector_seconds)),
        f"per {part.unit}: the collector's CPU (its own process) for the run's spans",
    )
    p99 = medians(lambda run: run.measured.p99_ms)
    if p99 != (None, None):
        yield ("p99 ms", *p99, "wrk's latency, 99th percentile")
    received = sum(run.received for run in part.off), sum(run.received for run in part.on)
    yield ("spans", *received, spans_note(part))
    if part.lost:
        yield ("LOST", None, part.lost, "deliveries that never arrived")


def spans_note(part: Part) -> str:
    """The spans received with tracing on, by kind, against those expected."""
    received: Counter[str] = Counter()
    expected: Counter[str] = Counter()
    for run in part.on:
        received.update(run.spans)
        expected.update(run.measured.expected)
    each = ", ".join(
        f"{kind} {received[kind]:,} of {expected[kind]:,}"
        for kind in sorted(received.keys() | expected.keys())
    )
    dropped = sum(run.dropped for run in part.on)
    return f"dropped {dropped:,} (all runs; received of expected: {each})"


def report(result: Result) -> None:
    """One table: each part's medians with tracing off and on, and the ratios."""
    print(f"\n{result.database:<32} {'off':>9} {'on':>9}")
    for part in result.parts:
        title = TITLES[part.name]
        for what, off, on, note in part_rows(part):
            print(f"  {title:<10} {what:<19} {number(off):>9} {number(on):>9}   {note}")
            title = ""


def report_setup(options: Options) -> None:
    print(
        f"tracing off and on (OTEL_TRACES_SAMPLER=always_on, OTLP/HTTP to a local collector "
        f"in its own process), {options.rounds} rounds of off then on; ratios: the median "
        "of each round's on/off"
    )
    deliveries = options.events * options.endpoints
    details = {
        "publish": f"events.publish in this process, {options.events:,} events a round to "
        f"{options.endpoints} endpoints, a transaction an event",
        "api": f"GET /api/v1/programs (50 programs), a clubwire serve process a run, wrk "
        f"{options.connections} connections for {options.seconds} s after {WARMUP_SECONDS} s",
        "delivery": f"one clubwire worker draining {options.events:,} events × "
        f"{options.endpoints} endpoints = {deliveries:,} deliveries a run",
    }
    for part in options.parts:
        print(f"  {TITLES[part]}: {details[part]}")


def conclude(results: list[Result]) -> bool:
    """The last lines; whether no delivery was lost and no untraced run sent a span."""
    for name in PARTS:
        found = [(result.database, part) for result in results for part in result.parts]
        mine = [(database, part.ratio()) for database, part in found if part.name == name]
        if mine:
            each = ", ".join(f"{database} {ratio:.2f}" for database, ratio in mine)
            lowest = min(ratio for _, ratio in mine)
            print(f"tracing {name} ratio {lowest:.2f}   ({each}; median of rounds' on/off)")
    parts = [part for result in results for part in result.parts]
    received = sum(run.received for part in parts for run in part.on)
    dropped = sum(run.dropped for part in parts for run in part.on)
    untraced = sum(run.received for part in parts for run in part.off)
    print(
        f"tracing spans {received} dropped {dropped}   (received by the collector in the runs "
        f"with tracing on; the runs with it off sent {untraced})"
    )
    if untraced:
        print("warning: runs with tracing off sent spans: the variables leaked into them")
    return not untraced and not any(part.lost for part in parts)


def bench(options: Options) -> bool:
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        raise BenchError(f"OpenTelemetry is not installed ({tracing.EXTRA})")
    if "api" in options.parts and shutil.which("wrk") is None:
        raise BenchError("wrk is not installed (apt-get install wrk)")
    results = []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-trace-")))
        collector = start_collector(stack, workdir, environment(os.environ, None))
        collector = dataclasses.replace(collector, down=options.collector_down)
        tls = make_tls(workdir)
        receiver = start_receiver(stack, workdir, tls.server_pem, busy_roles(options.endpoints))
        report_setup(options)
        for name in options.databases:
            results.append(bench_database(name, workdir, tls, receiver, collector, options))
            report(results[-1])
    return conclude(results)


if __name__ == "__main__":
    sys.exit(exit_status(PROG, lambda: bench(parse_options(sys.argv[1:]))))
