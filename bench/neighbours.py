"""Does a quiet club stay quick beside three noisy neighbours? Publish → receipt and its API.

Issue 31 (item 4): beside a hanging endpoint, a dead one with 100,000 due retries and another
club's key hammered past its limit, a quiet club's p95 publish → receipt went from 9 to 94 ms
(and from 6 to 170 ms), its API p95 from 3.3 to 22.2 ms. This script measures the quiet club
alone and then beside those three neighbours, in the same run, on the real processes: one
``clubwire serve`` with the internal API on (as ``bench/burst.py`` starts it) and, on
PostgreSQL, ``WORKERS`` (2) ``clubwire worker`` processes; on SQLite the serve alone, whose
worker runs inside it (a second worker would find the SQLite worker lock taken).

Each round, in a fresh database, has two phases of ``--seconds`` (12) each, with the same
quiet load, from two threads of this process, each with a keep-alive connection:

- **publishing**: one event every ``PUBLISH_INTERVAL`` (50 ms) to the quiet club
  (``POST /internal/v1/clubs/{slug}/events``), fanned out to its ``QUIET_ENDPOINTS`` (2)
  endpoints at the bench receiver (``bench/receiver.py``). A delivery's latency is its first
  arrival at the receiver minus the time its publish was answered (one machine, one clock);
- **reading**: ``GET /clubs/{slug}/api/v1/programs`` (50 programs, as ``bench/api.py``) at
  ``API_RATE`` (20) requests/s, each request's latency from sending to the whole answer read.
  The quiet club spreads them over ``QUIET_KEYS`` (4) keys of its own, so that it stays
  within the default limits (600 requests a minute per key, 1,800 per club) for both phases
  of a round, which may fall in one minute's window: at 20 requests/s one key would pass its
  own limit, and the quiet club would be a noisy one.

The phase **alone** has only that. The phase **beside the neighbours** has, on fresh
processes, meanwhile (started ``WARMUP_SECONDS`` (3) before the quiet load, and kept up until
the quiet club's last delivery arrived):

- club H (``hanging``): one endpoint at the receiver's silent role, which reads each request
  and never answers, so each attempt ends at the attempt timeout (``testbed.ATTEMPT_TIMEOUT``,
  2 s); H publishes ``HANGING_RATE`` (10) events/s, more than its lane can take (16 attempts
  in flight for 2 s is 8/s), so the workers always hold attempts hanging on it;
- club D (``basalt``, ``testbed.dead_endpoint``): one endpoint at a port nobody listens on,
  with ``DEAD_BACKLOG`` (100,000) deliveries due now (retries after a first failed attempt),
  inserted in one statement before this phase (``testbed.bulk_deliveries``, then vacuumed,
  analysed and checkpointed on PostgreSQL, as ``bench/scale.py`` does);
- club K (``hammered``): one valid key read at ``HAMMER_RATE`` (200) requests/s in all from
  ``HAMMER_THREADS`` (2) keep-alive clients: 20 times its limit of 600 a minute, so past the
  first 3 s of a minute nearly all are answered 429 (the warm-up covers those 3 s). The pace
  is fixed, not all-out: on this machine's 2 cores an all-out flood would mostly measure the
  load generator taking a core from the platform; 200/s is far past the limit yet costs the
  clients about a tenth of a core, in a process of their own (``multiprocessing``, spawned),
  so that neither their CPU nor their hold on the GIL delays the quiet club's clients. All
  clients pace themselves the same way: a request that comes late is not made up for by a
  burst.

Both phases run on fresh processes, the quiet club alone first: D's backlog, once loaded,
stays. For each phase, the report gives p50, p95 and p99 of publish → receipt over the quiet
club's deliveries (and the p95 of the publishes themselves), p50 and p95 of its API
requests; the CPU each part of the platform took meanwhile (serve, workers, PostgreSQL's
backends, receiver, the bench's load), as % of one core, and how long the serve's and the
workers' event loops were runnable but waited for a CPU (the machine's other work shows
there too); beside the neighbours, what they did from the warm-up to the end (H's events,
K's answers, D's attempts). Then the median over ``--rounds`` (3) rounds of each figure,
and the ratios beside/alone of the p95s.

Target (issue 31): the quiet club's p95 beside the three neighbours within 2× of its p95
alone, both publish → receipt and the API. The exit status is non-zero when one of the quiet
club's deliveries was lost or one of its API requests was not answered 200.

Run from the repository root: ``.venv/bin/python bench/neighbours.py [--database
sqlite|postgresql|both] [--seconds 12] [--rounds 3]`` (PostgreSQL by default, through
``--postgres-url``; about 3 minutes on 2 cores). A quick smoke run: ``--seconds 5 --rounds
1``.
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import os
import queue
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import ExitStack, closing, contextmanager
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from functools import partial
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Event as StopEvent
from pathlib import Path

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from api import program_records
from burst import DATABASES, PLATFORM_TOKEN, POSTGRES_URL, publish, serve
from clubwire.domain import scopes, timestamps
from clubwire.services import programs
from clubwire.services.club_api import keys
from clubwire.storage.models import Club, Delivery
from harness import HOST, START_TIMEOUT, BenchError, Process, exit_status, free_ports
from measuring import Arrived, Expected, database_cpu, process_cpu, process_waited, wait_for
from receiver import SILENT, Receiver, healthy_roles, start_receiver
from testbed import (
    SEED,
    Bed,
    Target,
    Tls,
    bulk_deliveries,
    dead_endpoint,
    make_tls,
    new_club,
    new_endpoint,
    prepare_bed,
    wait_started,
    worker,
)

PROG = "bench/neighbours.py"
QUIET, HANGING, HAMMERED = "quiet", "hanging", "hammered"  # club slugs (D: testbed's basalt)
QUIET_ENDPOINTS, QUIET_KEYS = 2, 4
PUBLISH_INTERVAL = 0.050  # seconds between the quiet club's events
API_RATE = 20.0  # the quiet club's API requests/s
HANGING_RATE = 10.0  # events/s to the club whose endpoint hangs
HAMMER_RATE, HAMMER_THREADS = 200.0, 2  # requests/s with the hammered key, in all
DEAD_BACKLOG = 100_000
DEAD_DUE_IN = timedelta(0)  # due now (row n n ms sooner)
WORKERS = 2  # clubwire worker processes on PostgreSQL
SECONDS, ROUNDS = 12, 3
IDLE_SECONDS = 1.0  # the platform idles this long before any load
WARMUP_SECONDS = 3.0  # the neighbours start this long before the quiet load
TARGET_RATIO = 2.0  # beside / alone, p95 (issue 31)
REQUEST_TIMEOUT = 30.0


@dataclass(frozen=True)
class Options:
    databases: list[str]
    seconds: int
    rounds: int
    postgres_url: str


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="postgresql")
    parser.add_argument(
        "--seconds", type=int, default=SECONDS, help=f"quiet load per phase ({SECONDS})"
    )
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds ({ROUNDS})")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    args = parser.parse_args(argv)
    if min(args.seconds, args.rounds) < 1:
        parser.error("--seconds and --rounds must be at least 1")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(databases, args.seconds, args.rounds, args.postgres_url)


# -- the clubs --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tenants:
    """The quiet club's keys and endpoints (id → receiver role), and its neighbours'."""

    quiet_keys: list[str]
    roles: dict[str, str]
    hammered_key: str
    dead: Target


def seed_clubs(bed: Bed, receiver: Receiver) -> Tenants:
    """The quiet club (programs, keys, endpoints at the receiver), H (an endpoint at the
    silent role), K (programs and one key) and D (a dead endpoint, nothing due yet)."""
    now = timestamps.utc_now()
    with bed.sessions.begin() as session:
        quiet = reading_club(session, QUIET, now)
        quiet_keys = [new_key(session, quiet, now) for _ in range(QUIET_KEYS)]
        roles = {
            new_endpoint(session, bed, quiet, receiver.url(role))[0].id: role
            for role in healthy_roles(QUIET_ENDPOINTS)
        }
        new_endpoint(session, bed, new_club(session, HANGING), receiver.url(SILENT))
        hammered_key = new_key(session, reading_club(session, HAMMERED, now), now)
    return Tenants(quiet_keys, roles, hammered_key, dead_endpoint(bed))


def reading_club(session: Session, slug: str, now: datetime) -> Club:
    """A club with its module on and 50 public programs to read."""
    club = new_club(session, slug)
    programs.import_programs(session, club, program_records(), now)
    return club


def new_key(session: Session, club: Club, now: datetime) -> str:
    return keys.create_key(session, club, [scopes.READ_PROGRAMS], "bench", now)[1]


# -- paced HTTP clients -----------------------------------------------------------------------


def paced(interval: float, going: Callable[[], bool]) -> Iterator[int]:
    """0, 1, 2, … one every ``interval`` seconds while ``going()``; one that comes late
    makes the next no sooner (no burst to catch up)."""
    due, number = time.monotonic(), 0
    while going():
        time.sleep(max(0.0, due - time.monotonic()))
        yield number
        number += 1
        due = max(due + interval, time.monotonic())


def until(seconds: float) -> Callable[[], bool]:
    deadline = time.monotonic() + seconds
    return lambda: time.monotonic() < deadline


def connect(port: int) -> http.client.HTTPConnection:
    return http.client.HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT)


def read_programs(connection: http.client.HTTPConnection, slug: str, key: str) -> int:
    """``GET`` the club's programs with ``key``, the whole answer read; its status."""
    headers = {"Authorization": f"Bearer {key}"}
    connection.request("GET", f"/clubs/{slug}/api/v1/programs", headers=headers)
    answer = connection.getresponse()
    answer.read()
    return answer.status


# -- the quiet club's load --------------------------------------------------------------------


@dataclass
class QuietLoad:
    """What the quiet club's clients saw: when each publish was answered (``time.time``), by
    event id; each publish's and each API request's latency in ms, and the API's answers
    other than 200."""

    answered: dict[str, float] = field(default_factory=dict)
    publish_ms: list[float] = field(default_factory=list)
    api_ms: list[float] = field(default_factory=list)
    refused: Counter[int] = field(default_factory=Counter)


def together(*calls: Callable[[], None]) -> None:
    """Each call in a thread of its own, until all return; then the first error, raised."""
    failures: list[Exception] = []

    def running(call: Callable[[], None]) -> None:
        try:
            call()
        except Exception as exc:
            failures.append(exc)

    threads = [threading.Thread(target=running, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def quiet_load(port: int, tenants: Tenants, seconds: float) -> QuietLoad:
    """Publish and read at the quiet club's pace for ``seconds``, in two threads."""
    load, going = QuietLoad(), until(seconds)
    together(
        lambda: quiet_publishing(port, load, going),
        lambda: quiet_reading(port, tenants.quiet_keys, load, going),
    )
    return load


def quiet_publishing(port: int, load: QuietLoad, going: Callable[[], bool]) -> None:
    rng = random.Random(SEED)
    with closing(connect(port)) as connection:
        for number in paced(PUBLISH_INTERVAL, going):
            start = time.time()
            event_id, answered = publish(connection, QUIET, number, rng, PLATFORM_TOKEN)
            load.answered[event_id] = answered
            load.publish_ms.append((answered - start) * 1000)


def quiet_reading(port: int, keys_: list[str], load: QuietLoad, going: Callable[[], bool]) -> None:
    with closing(connect(port)) as connection:
        for number in paced(1 / API_RATE, going):
            start = time.perf_counter()
            status = read_programs(connection, QUIET, keys_[number % len(keys_)])
            load.api_ms.append((time.perf_counter() - start) * 1000)
            if status != 200:
                load.refused[status] += 1


# -- the neighbours' load, in a process of its own --------------------------------------------


@dataclass(frozen=True)
class Noise:
    """What the neighbours' clients did: H's events, and K's answers by status."""

    hanging_events: int
    hammered: dict[int, int]


# What the neighbours' process sends back: H's events and K's answers, or why it failed (plain
# values: its classes are those of ``__mp_main__``, which this process has not).
Told = tuple[int, dict[int, int]] | str


def make_noise(
    port: int, token: str, key: str, events: tuple[StopEvent, StopEvent], results: Queue[Told]
) -> None:
    """The neighbours' clients (the spawned process's target, its imports done): H's
    publisher and K's hammering threads, from setting the first of ``events`` until the
    second is set; then what they did, put on ``results``."""
    started, stop = events
    started.set()

    def going() -> bool:
        return not stop.is_set()

    hanging = [0]
    answers: list[Counter[int]] = [Counter() for _ in range(HAMMER_THREADS)]
    calls = [partial(hanging_publishing, port, token, hanging, going)]
    calls += [partial(hammering, port, key, got, going) for got in answers]
    try:
        together(*calls)
    except Exception as exc:
        results.put(f"the neighbours' clients failed: {exc!r}")
    else:
        results.put((hanging[0], dict(sum(answers, Counter[int]()))))


def hanging_publishing(
    port: int, token: str, published: list[int], going: Callable[[], bool]
) -> None:
    rng = random.Random(SEED + 1)
    with closing(connect(port)) as connection:
        for number in paced(1 / HANGING_RATE, going):
            publish(connection, HANGING, number, rng, token)
            published[0] += 1


def hammering(port: int, key: str, answers: Counter[int], going: Callable[[], bool]) -> None:
    with closing(connect(port)) as connection:
        for _ in paced(HAMMER_THREADS / HAMMER_RATE, going):
            answers[read_programs(connection, HAMMERED, key)] += 1


@dataclass(frozen=True)
class Noisy:
    """The neighbours' clients running: their process, and how to stop them."""

    pid: int
    stop: Callable[[], Noise]  # stops them and tells what they did


@contextmanager
def neighbours(port: int, tenants: Tenants) -> Iterator[Noisy]:
    """The neighbours' clients in a spawned process for the block, once they start."""
    context = multiprocessing.get_context("spawn")
    started, stop, results = context.Event(), context.Event(), context.Queue()
    arguments = (port, PLATFORM_TOKEN, tenants.hammered_key, (started, stop), results)
    process = context.Process(target=make_noise, args=arguments, daemon=True)

    def stopped() -> Noise:
        stop.set()
        try:
            told = results.get(timeout=REQUEST_TIMEOUT)
        except queue.Empty:
            raise BenchError("the neighbours' clients did not tell what they did") from None
        if isinstance(told, str):
            raise BenchError(told)
        return Noise(*told)

    process.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not started.wait(0.1):
            if process.exitcode is not None or time.monotonic() > deadline:
                raise BenchError("the neighbours' clients did not start")
        yield Noisy(process.pid or 0, stopped)
    finally:
        stop.set()
        process.join(REQUEST_TIMEOUT)
        if process.is_alive():
            process.kill()


# -- the platform, and where its CPU goes -----------------------------------------------------

Parts = dict[str, list[Process]]  # "serve", "workers" → their processes
Snapshot = dict[str, float]  # a part, "<part> waited" or "database:<pid>" → seconds so far
WAITERS = ("serve", "workers")  # parts whose event loops' waits for a CPU are told


def start_platform(stack: ExitStack, bed: Bed, port: int, label: str) -> Parts:
    """``clubwire serve`` with the internal API on (on SQLite its worker runs inside) and,
    on PostgreSQL, ``WORKERS`` ``clubwire worker`` processes, starting side by side; once
    all are up."""
    many = WORKERS if bed.name == "postgresql" else 0
    workers = [stack.enter_context(worker(bed, f"{label}-{n}")) for n in range(many)]
    parts: Parts = {"serve": [serve(stack, bed, port, label)], "workers": workers}
    for process in workers:
        wait_started(process)
    return parts


def snapshot(pids: dict[str, list[int]], bed: Bed) -> Snapshot:
    """The CPU seconds so far of each part's processes and of each of PostgreSQL's backends
    of the bench's database, and how long the serve's and the workers' main threads (their
    event loops) were runnable but waited for a CPU."""
    found = {part: sum(process_cpu(pid) or 0.0 for pid in ids) for part, ids in pids.items()}
    for part in (part for part in WAITERS if part in pids):
        found[f"{part} waited"] = sum(process_waited(pid) or 0.0 for pid in pids[part])
    for pid, seconds in (database_cpu(bed) or {}).items():
        found[f"database:{pid}"] = seconds
    return found


def shares(before: Snapshot, after: Snapshot, seconds: float) -> dict[str, float]:
    """What each part spent between the snapshots, as % of one core over ``seconds``; the
    database's backends together (those that came meanwhile counted from nothing)."""
    spent: dict[str, float] = {}
    for name, value in after.items():
        part = "database" if name.startswith("database:") else name
        spent[part] = spent.get(part, 0.0) + value - before.get(name, 0.0)
    return {part: value / seconds * 100 for part, value in spent.items()}


# -- one phase --------------------------------------------------------------------------------


def quantile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


@dataclass(frozen=True)
class Phase:
    """One phase as the quiet club saw it, what the platform's parts spent meanwhile, and
    (beside the neighbours) what those did."""

    receipt_ms: list[float]  # publish → receipt, per delivery
    publish_ms: list[float]  # the publishes' own latency
    api_ms: list[float]
    lost: int
    refused: int  # API answers other than 200
    cpu: dict[str, float]  # % of one core, by part
    noise: Noise | None = None
    dead_attempted: int = 0  # D's deliveries attempted again

    def receipt(self, share: float) -> float:
        return quantile(self.receipt_ms, share)

    def api(self, share: float) -> float:
        return quantile(self.api_ms, share)


def run_phase(
    bed: Bed, receiver: Receiver, tenants: Tenants, seconds: float, label: str, noisy: bool
) -> Phase:
    """Fresh processes; with ``noisy`` the neighbours' clients, warmed up; the quiet load,
    then until its deliveries arrived."""
    (port,) = free_ports(1)
    with ExitStack() as stack:
        parts = start_platform(stack, bed, port, label)
        time.sleep(IDLE_SECONDS)
        pids = watched(parts, receiver)
        noise = stack.enter_context(neighbours(port, tenants)) if noisy else None
        if noise is not None:
            pids["load"].append(noise.pid)
            time.sleep(WARMUP_SECONDS)
        receiver.reset()
        since, before, start = timestamps.utc_now(), snapshot(pids, bed), time.monotonic()
        load = quiet_load(port, tenants, seconds)
        cpu = shares(before, snapshot(pids, bed), time.monotonic() - start)
        expected, event_of = quiet_deliveries(bed, tenants, since)
        arrived = wait_for(receiver, expected, [p for found in parts.values() for p in found])
        told = noise.stop() if noise is not None else None
    receipt = receipt_ms(expected, arrived, event_of, load.answered)
    lost = len(load.answered) * QUIET_ENDPOINTS - len(receipt)
    return Phase(receipt, load.publish_ms, load.api_ms, lost, sum(load.refused.values()), cpu, told)


def watched(parts: Parts, receiver: Receiver) -> dict[str, list[int]]:
    """The processes whose CPU is told, by part: the platform's (no workers on SQLite), the
    receiver, and this one (the quiet club's load; the neighbours' joins it)."""
    pids = {part: [process.popen.pid for process in found] for part, found in parts.items()}
    pids = {part: found for part, found in pids.items() if found}
    return pids | {"receiver": [receiver.process.popen.pid], "load": [os.getpid()]}


def quiet_deliveries(
    bed: Bed, tenants: Tenants, since: datetime
) -> tuple[Expected, dict[str, str]]:
    """The quiet club's deliveries made since ``since``, by receiver role; and each one's
    event."""
    query = select(Delivery.id, Delivery.endpoint_id, Delivery.event_id).where(
        Delivery.created_at >= since, Delivery.endpoint_id.in_(tenants.roles)
    )
    expected: Expected = {role: set() for role in tenants.roles.values()}
    event_of = {}
    with bed.sessions() as session:
        for delivery_id, endpoint_id, event_id in session.execute(query):
            expected[tenants.roles[endpoint_id]].add(delivery_id)
            event_of[delivery_id] = event_id
    return expected, event_of


def receipt_ms(
    expected: Expected, arrived: Arrived, event_of: dict[str, str], answered: dict[str, float]
) -> list[float]:
    """Each delivery that arrived: its first arrival minus its publish's answer, in ms."""
    return [
        (arrived[role][delivery] - answered[event_of[delivery]]) * 1000
        for role, ids in expected.items()
        for delivery in ids & arrived.get(role, {}).keys()
    ]


def dead_attempted(bed: Bed, dead: Target) -> int:
    """How many of D's deliveries were attempted again (each loaded after one attempt)."""
    query = select(func.count()).where(
        Delivery.endpoint_id == dead.endpoint_id, Delivery.attempt > 1
    )
    with bed.sessions() as session:
        return session.scalar(query) or 0


# -- rounds and the report --------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    alone: Phase
    beside: Phase


def bench_round(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options, number: int
) -> Round:
    """In a fresh database: the quiet club alone, then D's backlog loaded, then the quiet
    club beside the neighbours (always in that order: the backlog, once loaded, stays)."""
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / f"{name}-{number}", tls, options.postgres_url)
        tenants = seed_clubs(bed, receiver)
        alone = run_phase(bed, receiver, tenants, options.seconds, f"alone-{number}", False)
        bulk_deliveries(bed, [tenants.dead], DEAD_BACKLOG, DEAD_DUE_IN, "dead")
        beside = run_phase(bed, receiver, tenants, options.seconds, f"beside-{number}", True)
        return Round(alone, replace(beside, dead_attempted=dead_attempted(bed, tenants.dead)))


def phase_line(label: str, phase: Phase) -> str:
    return (
        f"{label:<7} receipt p50 {phase.receipt(0.5):6.1f} p95 {phase.receipt(0.95):6.1f} "
        f"p99 {phase.receipt(0.99):6.1f} ms ({len(phase.receipt_ms)}), publish p95 "
        f"{quantile(phase.publish_ms, 0.95):5.1f} ms, API p50 "
        f"{phase.api(0.5):5.1f} p95 {phase.api(0.95):5.1f} ms ({len(phase.api_ms)}), "
        f"lost {phase.lost}, refused {phase.refused}"
    )


def cpu_line(phase: Phase) -> str:
    spent = ", ".join(
        f"{part} {share:.0f}" for part, share in phase.cpu.items() if not part.endswith("waited")
    )
    waited = ", ".join(
        f"{part.removesuffix(' waited')} {share:.1f} %"
        for part, share in phase.cpu.items()
        if part.endswith(" waited")
    )
    return f"CPU, % of a core: {spent}; waited for a CPU: {waited}"


def noise_line(phase: Phase) -> str:
    if phase.noise is None:
        return ""
    hammered = phase.noise.hammered
    return (
        f"neighbours: H {phase.noise.hanging_events:,} events, K {sum(hammered.values()):,} "
        f"requests ({hammered.get(429, 0):,} answered 429), D {phase.dead_attempted:,} of "
        f"{DEAD_BACKLOG:,} attempted"
    )


def report_round(name: str, number: int, round_: Round) -> None:
    print(f"  {name} round {number}:")
    for label, phase in (("alone", round_.alone), ("beside", round_.beside)):
        print(f"    {phase_line(label, phase)}")
        print(f"      {cpu_line(phase)}")
        if phase.noise is not None:
            print(f"      {noise_line(phase)}")


def report_database(name: str, rounds: list[Round]) -> None:
    """The median over rounds of each figure, and the ratios of the p95s against the target."""
    figures = {
        label: [
            statistics.median(figure(getattr(round_, label)) for round_ in rounds)
            for figure in FIGURES.values()
        ]
        for label in ("alone", "beside")
    }
    print(f"{name}, median of {len(rounds)} rounds (ms):")
    print(f"  {'':<7} " + " ".join(f"{title:>12}" for title in FIGURES))
    for label, values in figures.items():
        print(f"  {label:<7} " + " ".join(f"{value:>12.1f}" for value in values))
    for title in ("receipt p95", "API p95"):
        column = list(FIGURES).index(title)
        ratio = figures["beside"][column] / max(figures["alone"][column], 1e-9)
        verdict = "met" if ratio <= TARGET_RATIO else "MISSED"
        print(f"  {title} beside/alone {ratio:.2f}   (target ≤ {TARGET_RATIO:.0f}: {verdict})")


FIGURES: dict[str, Callable[[Phase], float]] = {
    "receipt p50": lambda phase: phase.receipt(0.5),
    "receipt p95": lambda phase: phase.receipt(0.95),
    "receipt p99": lambda phase: phase.receipt(0.99),
    "API p50": lambda phase: phase.api(0.5),
    "API p95": lambda phase: phase.api(0.95),
}


# -- main -------------------------------------------------------------------------------------


def bench(options: Options) -> bool:
    """Each database's rounds and report; whether the quiet club lost nothing and was
    refused nothing."""
    failed = 0
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-nb-")))
        tls = make_tls(workdir)
        roles = [*healthy_roles(QUIET_ENDPOINTS), SILENT]
        receiver = start_receiver(stack, workdir, tls.server_pem, roles)
        print(
            f"quiet club: an event every {PUBLISH_INTERVAL * 1000:.0f} ms to {QUIET_ENDPOINTS} "
            f"endpoints, {API_RATE:.0f} API requests/s, {options.seconds} s a phase; "
            f"neighbours: H {HANGING_RATE:.0f} events/s to a hanging endpoint, D "
            f"{DEAD_BACKLOG:,} due at a dead one, K {HAMMER_RATE:.0f} requests/s"
        )
        for name in options.databases:
            rounds = []
            for number in range(options.rounds):
                round_ = bench_round(name, workdir, tls, receiver, options, number)
                report_round(name, number, round_)
                rounds.append(round_)
                failed += sum(p.lost + p.refused for p in (round_.alone, round_.beside))
            report_database(name, rounds)
    return failed == 0


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
