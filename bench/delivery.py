"""How fast does one worker deliver webhooks, measured against a bare aiohttp sender?

Webhook delivery is clubwire's other hot path (DESIGN §6–§8): the worker claims due
deliveries in batches, signs the stored bytes afresh for every attempt, posts them over
HTTPS with aiohttp, and records the attempts in batches. This script measures, on SQLite and
on PostgreSQL, one ``clubwire worker`` process against a local HTTPS receiver:

- **throughput**: N events are published (in a few transactions) while no worker runs, each
  fanned out to M endpoints; then a worker starts and drains that backlog (a backlog is the
  reproducible way to keep one worker busy; publishing meanwhile would measure the publisher
  too). The bench leases the backlog's lanes itself while the workers start
  (``testbed.hold_lanes``) and gives them back once all are up, so that no worker's start-up
  falls inside another's drain. Deliveries/s is the number of this run's deliveries that
  reached the receiver divided by the time from the first of them to arrive to the last, so
  neither the worker's start-up nor the publishing counts;
- **the ceiling**: in the same run, a bare aiohttp sender (in this process, on the same
  event loop the worker uses (uvloop), same TLS trust, keep-alive, same limits in flight:
  ``max_in_flight`` in all and ``max_in_flight_per_endpoint`` per endpoint, the same headers
  (ours and Standard Webhooks') signed afresh per request) posts the very same stored bodies
  to the same receiver, measured the same way. The ratio ours/bare is what the worker's own
  work costs (claiming, recording, bookkeeping), independent of how fast the machine is;
- **latency at light load**: with a worker started and idle, one event every 20 ms for 200
  events to a club with one endpoint; latency is the receiver's arrival time minus the time
  the publishing transaction committed (one machine, one clock). PostgreSQL workers are woken
  by ``LISTEN/NOTIFY``; on SQLite the worker checks the file's data version every 20 ms;
- **a receiver that never answers**: the throughput run again with one more endpoint, on a
  path where the receiver reads the request and never responds, subscribed to the same
  events; the healthy endpoints' deliveries/s should fall by less than 5 %. Attempts time
  out after 2 s here (``CLUBWIRE_ATTEMPT_TIMEOUT``), so the silent endpoint's attempts fail,
  are recorded and make room for the next ones within the run;
- **a throttling receiver**: the throughput run again with one more endpoint instead, whose
  receiver answers ``429 Too Many Requests`` to every other request (issue 33); the healthy
  endpoints' deliveries/s should fall by less than 5 %. Its lane narrows to fewer attempts in
  flight on each 429 and grows back by one on each other answer (ADR 0015), so it takes a
  sliver of the worker; the line ``throttling change <±x.x> %`` reads it. Its 429s are retried
  after the schedule's first step, past the run.

- **a dead endpoint's backlog** (``--backlog N``): after the rounds, one endpoint of another
  club, at a port nobody listens on, gets N deliveries due in two hours (pending, attempt 1,
  inserted in one SQL statement), and the throughput run goes again ``--rounds`` times; the
  line ``backlog <N> change <±x.x> %`` compares the healthy endpoints' best deliveries/s with
  the best without it. Those deliveries never come due within the run, so any change is what
  the worker pays to find due work past them (issue 12: finding due work should cost the same
  at any backlog; target within 5 %). The runs with it come after those without, not in
  alternation: loading a million rows takes seconds to a minute;
- **in order** (``--ordered``, issue 35; instead of all the above): the busy club's healthy
  endpoints ordered, with ``game.updated`` events over ``--keys`` games (100), so as many
  ordering keys, and in the same round the same events with the endpoints unordered; the
  ratio ordered / unordered (target: at least 0.5) and the inversions the receiver counted
  (a delivery whose ``sequence`` is lower than one already received for its key: none may
  be in the ordered runs). Tables and last line: ``ordered.py``;
- **several workers** (``--workers N``, PostgreSQL only): in each round, after the runs
  above, N ``clubwire worker`` processes drain the same kind of published backlog together
  (in the same round as the one worker they are compared with, so that the machine's speed,
  which moves between minutes, moves both); the line ``workers <N> change <±x.x> %
  duplicates <n>`` compares their best deliveries/s with one worker's and counts the
  deliveries that reached the receiver more than once (target: not below one worker's, no
  duplicate).

The throughput runs go in alternating rounds (``--rounds``, 3): worker, bare sender, worker
with the silent endpoint, worker with the throttling one, the order of the worker's runs
turning each round so that no kind always meets the larger database. The best run of each kind
counts, as the machine may be busy with other work; beside the ratio and the neighbours'
changes, the median of each round's (its runs go seconds apart, so a machine whose speed moves
between minutes moves both sides). After each worker stops, the script also checks that every
delivery that reached the receiver is recorded as succeeded ("not recorded": a worker that
loses results sends those deliveries again when their lease runs out). Each run counts only its
own deliveries; others that arrive meanwhile (sent again from earlier runs) are reported apart.
Beside each kind's CPU time per delivery, the table shows where else the worker's cost went:
the CPU time of PostgreSQL's backends serving the run (SQLite works inside the worker, in its
own figure), and how long each side's event loop was runnable yet waited for
a CPU (both from ``/proc``): on two cores, what the database spends is taken from the
deliveries whichever process spends it (ADR 0008, sessions 11 and 14).
The receiver is a second process (``bench/receiver.py``, started by this script): a raw
HTTP/1.1 protocol on uvloop over TLS with a trustme certificate for 127.0.0.1, one port per endpoint
(as separate hosts would be), answering ``200 ok``. It records the first arrival time of each
``X-Service-Delivery`` id and reports through a plain HTTP control port. It is lean so that it
is not the bottleneck; both senders share it, so its cost is in both sides of the ratio.

Targets (one worker process, each database; issue 12): ratio at least 0.6 (the goal 0.7);
p50 under 20 ms at light load; with the silent endpoint, with the throttling one (issue 33),
or beside the dead backlog, the others' deliveries/s falls by less than 5 %. The last
line of the output is ``ratio <ours/bare>``, the lower of the two databases, two decimals.
The exit status is non-zero when a delivery to a healthy endpoint was lost.

Run from the repository root: ``.venv/bin/python bench/delivery.py [--database both]
[--events 4000] [--endpoints 5] [--backlog 1000000] [--workers 2] [--ordered [--keys 100]]``.
PostgreSQL: a database is created for the run and dropped afterwards, through
``--postgres-url`` (default: the tests' ``CLUBWIRE_TEST_POSTGRES_URL`` or
``postgresql://postgres@127.0.0.1:5432/postgres``).

This file holds the options, the scenario on one database and the main function; beside it,
``receiver.py`` (the receiver and the handle on it), ``testbed.py`` (TLS, the databases, the
worker process, clubs and events), ``measuring.py`` (drains and light load, at the receiver),
``bare_sender.py`` (the ceiling), ``report.py`` (the targets and the tables), ``ordered.py``
(the ordered runs' outcome and tables), and
``harness.py``, which ``bench/api.py`` shares (ports, processes, how they end).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from bare_sender import bare_run
from clubwire.domain import timestamps
from clubwire.settings import Settings
from harness import exit_status
from measuring import Drain, Light, expected_deliveries, light_load, measure_drain
from ordered import OrderedOutcome, report_ordered, report_ordered_setup
from receiver import Receiver, busy_roles, healthy_roles, start_receiver
from report import Outcome, report, report_setup
from testbed import (
    NEIGHBOURS,
    SEED,
    Bed,
    Clubs,
    Tls,
    bulk_deliveries,
    dead_endpoint,
    hold_lanes,
    make_tls,
    prepare_bed,
    publish_backlog,
    publish_keyed,
    release_lanes,
    seed,
    set_ordered,
    switch_neighbour,
    wait_started,
    worker,
)

PROG = "bench/delivery.py"
DATABASES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
POSTGRES_URL = os.environ.get(
    "CLUBWIRE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
EVENTS = 4000  # per throughput run: with 5 endpoints, 20,000 deliveries, about 5 s a run
ROUNDS = 3  # alternating; the best run of each kind counts
IDLE_SECONDS = 1.0  # a worker idles this long before the light load starts
BACKLOG_DUE_IN = timedelta(hours=2)  # the dead endpoint's deliveries: none comes due in a run
KEYS = 100  # ordering keys (games) of the ordered runs' events (issue 35)


# -- options ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Runs:
    """What a benchmark of events to endpoints runs (``bench/publish.py`` runs this much)."""

    databases: list[str]
    events: int
    endpoints: int
    rounds: int
    postgres_url: str
    backlog: int  # deliveries waiting, for the runs beside them (0: none)


@dataclass(frozen=True)
class Options(Runs):
    workers: int  # workers draining together on PostgreSQL (1: no such runs)
    ordered: bool = False  # the ordered runs against unordered ones, instead of the others
    keys: int = KEYS  # ordering keys of the ordered runs' events


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    parser.add_argument("--events", type=int, default=EVENTS, help=f"events per run ({EVENTS})")
    parser.add_argument("--endpoints", type=int, default=5, help="healthy endpoints (5)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds ({ROUNDS})")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    parser.add_argument(
        "--backlog", type=int, default=0, help="then runs beside a dead endpoint holding N (0)"
    )
    parser.add_argument(
        "--workers", type=int, default=1, help="then runs with N workers, PostgreSQL (1)"
    )
    parser.add_argument(
        "--ordered", action="store_true", help="ordered against unordered runs instead"
    )
    parser.add_argument("--keys", type=int, default=KEYS, help=f"with --ordered: keys ({KEYS})")
    args = parser.parse_args(argv)
    # Room left for the neighbours
    most = Settings.model_fields["max_endpoints_per_club"].default - len(NEIGHBOURS)
    if args.events < 1 or args.rounds < 1 or not 1 <= args.endpoints <= most:
        parser.error(f"--events and --rounds must be at least 1, --endpoints between 1 and {most}")
    if args.backlog < 0 or args.workers < 1:
        parser.error("--backlog must be at least 0, --workers at least 1")
    if args.workers > 1 and args.database == "sqlite":
        parser.error("--workers runs on PostgreSQL only (SQLite has one worker)")
    if args.ordered and (args.backlog or args.workers > 1):
        parser.error("--ordered runs without --backlog and --workers")
    if args.keys < 1:
        parser.error("--keys must be at least 1")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(
        databases,
        args.events,
        args.endpoints,
        args.rounds,
        args.postgres_url,
        args.backlog,
        args.workers,
        args.ordered,
        args.keys,
    )


# -- one database -----------------------------------------------------------------------------


def bench_database(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options
) -> Outcome:
    """Rounds of: throughput (and, in the first, light load), the bare sender on the
    same deliveries, throughput with the silent endpoint on, and, if asked, several workers
    together; then, if asked, throughput beside a dead endpoint's backlog."""
    outcome = Outcome(DATABASES[name], backlog_size=options.backlog)
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / name, tls, options.postgres_url)
        clubs_ = seed(bed, receiver, healthy_roles(options.endpoints))
        several = options.workers if name == "postgresql" else 1
        outcome.worker_count = several
        kinds = [None, *NEIGHBOURS]
        for round_ in range(options.rounds):
            # The order turns each round, so that no kind always meets the larger database.
            for neighbour in kinds[round_ % 3 :] + kinds[: round_ % 3]:
                label = f"{neighbour or 'throughput'}-{round_}"
                since = timestamps.utc_now()
                drain = throughput(bed, receiver, clubs_, options, label, neighbour)
                outcome.check_records(bed, drain.delivered)
                outcome.runs_beside(neighbour).append(drain)
                if neighbour is not None:
                    continue
                if round_ == 0:
                    outcome.light = light_run(bed, receiver, clubs_)
                    outcome.check_records(bed, outcome.light.delivered)
                outcome.bare.append(bare_run(bed, receiver, clubs_, since))
            if several > 1:  # in the same round as the one worker it is compared with
                label = f"workers-{round_}"
                drain = throughput(bed, receiver, clubs_, options, label, workers=several)
                outcome.check_records(bed, drain.delivered)
                outcome.workers.append(drain)
        if options.backlog:
            bulk_deliveries(bed, [dead_endpoint(bed)], options.backlog, BACKLOG_DUE_IN, "dead")
            for round_ in range(options.rounds):
                drain = throughput(bed, receiver, clubs_, options, f"backlog-{round_}")
                outcome.check_records(bed, drain.delivered)
                outcome.backlog.append(drain)
    return outcome


def throughput(
    bed: Bed,
    receiver: Receiver,
    clubs_: Clubs,
    options: Options,
    label: str,
    neighbour: str | None = None,
    workers: int = 1,
) -> Drain:
    """Publish a backlog (with the ``neighbour`` endpoint on, the others off) and drain it."""
    switch_neighbour(bed, clubs_, neighbour)
    since = timestamps.utc_now()
    publish_backlog(bed, clubs_.busy_id, options.events, random.Random(f"{SEED}-{label}"))
    return drain_backlog(bed, receiver, clubs_, since, label, workers)


def drain_backlog(
    bed: Bed, receiver: Receiver, clubs_: Clubs, since: datetime, label: str, workers: int = 1
) -> Drain:
    """Start ``workers`` workers while the bench holds the busy club's lanes, then give the
    lanes back: the workers drain the healthy endpoints' deliveries made since ``since``."""
    expected = expected_deliveries(bed, clubs_, since)
    receiver.reset()
    held = hold_lanes(bed, [*clubs_.signing_secrets, *clubs_.neighbours.values()])
    with ExitStack() as stack:
        processes = [stack.enter_context(worker(bed, f"{label}-{n}")) for n in range(workers)]
        for process in processes:
            wait_started(process, poll=0.01)
        release_lanes(bed, held)  # all are up and idle: CPU time counts from here
        return measure_drain(bed, receiver, expected, processes)


def ordered_database(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options
) -> OrderedOutcome:
    """Rounds of: the healthy endpoints ordered, and unordered, on the same events (the
    order turning each round); the neighbours off."""
    outcome = OrderedOutcome(DATABASES[name])
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / name, tls, options.postgres_url)
        clubs_ = seed(bed, receiver, healthy_roles(options.endpoints))
        switch_neighbour(bed, clubs_, None)
        for round_ in range(options.rounds):
            for ordered in (True, False) if round_ % 2 == 0 else (False, True):
                drain = keyed_throughput(bed, receiver, clubs_, options, round_, ordered)
                outcome.check_records(bed, drain.delivered)
                outcome.runs_of(ordered).append(drain)
    return outcome


def keyed_throughput(
    bed: Bed, receiver: Receiver, clubs_: Clubs, options: Options, round_: int, ordered: bool
) -> Drain:
    """Make the healthy endpoints ordered or not, publish the round's events over
    ``options.keys`` keys (the same in both ways: one seed a round) and drain them."""
    set_ordered(bed, clubs_, ordered)
    since = timestamps.utc_now()
    rng = random.Random(f"{SEED}-keyed-{round_}")
    publish_keyed(bed, clubs_.busy_id, options.events, options.keys, rng)
    label = f"{'ordered' if ordered else 'unordered'}-{round_}"
    return drain_backlog(bed, receiver, clubs_, since, label)


def light_run(bed: Bed, receiver: Receiver, clubs_: Clubs) -> Light:
    """The light-load run, with a worker of its own, started and idle."""
    with worker(bed, "light") as process:
        wait_started(process)
        time.sleep(IDLE_SECONDS)
        return light_load(bed, receiver, clubs_.light_id, process)


# -- main -------------------------------------------------------------------------------------


def bench(options: Options) -> bool:
    """Measure each database and report; returns whether no delivery was lost (and, with
    ``--ordered``, none arrived out of order in the ordered runs)."""
    if options.ordered:
        return bench_ordered(options)
    outcomes = []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-bench-")))
        tls = make_tls(workdir)
        receiver = start_receiver(stack, workdir, tls.server_pem, busy_roles(options.endpoints))
        report_setup(options.events, options.endpoints, options.rounds, Settings(_env_file=None))
        for name in options.databases:
            outcome = bench_database(name, workdir, tls, receiver, options)
            report(outcome)
            outcomes.append(outcome)
    print(f"ratio {min(outcome.ratio for outcome in outcomes):.2f}")
    return not any(outcome.lost for outcome in outcomes)


def bench_ordered(options: Options) -> bool:
    """The ordered runs on each database; whether none was lost or arrived out of order."""
    outcomes = []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-bench-")))
        tls = make_tls(workdir)
        receiver = start_receiver(stack, workdir, tls.server_pem, busy_roles(options.endpoints))
        report_ordered_setup(options.events, options.endpoints, options.keys, options.rounds)
        for name in options.databases:
            outcome = ordered_database(name, workdir, tls, receiver, options)
            report_ordered(outcome)
            outcomes.append(outcome)
    inversions = sum(outcome.inversions for outcome in outcomes)
    print(f"ordered ratio {min(o.ratio for o in outcomes):.2f} inversions {inversions}")
    return not any(outcome.lost for outcome in outcomes) and not inversions


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
