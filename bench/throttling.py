"""Does an endpoint that answers 429 to half its requests cost its neighbours? (issue 33)

The busy club's five healthy endpoints drain a backlog of ``--events`` events (8,000) each, as
``bench/delivery.py``'s throughput run does (published before one ``clubwire worker``
starts, deliveries/s from the first arrival to the last), once alone and once beside a sixth
endpoint of the same club, subscribed to the same events, whose receiver answers ``429 Too
Many Requests`` to every other request (``bench/receiver.py``'s throttling role). That
endpoint's lane narrows to fewer attempts in flight on each 429 and grows back by one on each
success (ADR 0015), so it should take a sliver of the worker.

Each run has a fresh database of its own: ``bench/delivery.py`` runs every kind in one
database, which grows by a backlog each run, and on SQLite that drift is as large as what is
measured here. The two kinds alternate, ``--pairs`` (5) of each, the first kind turning each
pair; the report gives each run's deliveries/s and the worker's CPU time per healthy
delivery, the median of each kind, and the change beside the throttling endpoint. Target
(issue 33): the healthy endpoints' median deliveries/s falls by less than 5 %. The exit
status is non-zero when a healthy delivery was lost.

Run from the repository root: ``.venv/bin/python bench/throttling.py [--database
sqlite|postgresql|both] [--pairs 5] [--events 8000]`` (about 4 minutes a database on 2 cores).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

from delivery import DATABASES, POSTGRES_URL, Options, throughput
from harness import exit_status
from measuring import Drain
from receiver import THROTTLING, Receiver, busy_roles, healthy_roles, start_receiver
from testbed import Tls, make_tls, prepare_bed, seed

PROG = "bench/throttling.py"
ENDPOINTS = 5
TARGET_DROP = 5.0  # per cent (issue 33)
KINDS = (None, THROTTLING)  # alone, beside the throttling endpoint


def parse_options(argv: list[str] | None) -> tuple[Options, int]:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    parser.add_argument("--pairs", type=int, default=5, help="runs of each kind (5)")
    parser.add_argument("--events", type=int, default=8000, help="events per run (8000)")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    args = parser.parse_args(argv)
    if args.pairs < 1 or args.events < 1:
        parser.error("--pairs and --events must be at least 1")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(databases, args.events, ENDPOINTS, 1, args.postgres_url, 0, 1), args.pairs


def fresh_run(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options, neighbour: str | None
) -> Drain:
    """One drain in a database of its own, with ``neighbour`` on (None: alone)."""
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir, tls, options.postgres_url)
        clubs_ = seed(bed, receiver, healthy_roles(ENDPOINTS))
        return throughput(bed, receiver, clubs_, options, neighbour or "alone", neighbour)


def report(name: str, runs: dict[str | None, list[Drain]]) -> bool:
    """The runs of each kind, their medians, and the change; whether the target was met."""
    alone, beside = (statistics.median(d.rate for d in runs[kind]) for kind in KINDS)
    change = (beside / alone - 1) * 100
    print(f"\n{DATABASES[name]}")
    for kind in KINDS:
        rates = " · ".join(f"{d.rate:,.0f}" for d in runs[kind])
        median = statistics.median(d.rate for d in runs[kind])
        cpu = [c for d in runs[kind] if (c := d.cpu_per_delivery) is not None]
        shown = f", worker CPU {statistics.median(cpu):.0f} µs per delivery" if cpu else ""
        print(f"  {kind or 'alone':<11} median {median:>7,.0f}/s{shown}")
        print(f"  {'':<11} runs {rates} /s")
    met = change > -TARGET_DROP
    target = f"target > −{TARGET_DROP:.0f} %: {'met' if met else 'MISSED'}"
    print(f"throttling {name} change {change:+.1f} %   ({target})")
    return met


def bench(options: Options, pairs: int) -> bool:
    """Measure each database and report; returns whether no healthy delivery was lost."""
    lost = 0
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-429-")))
        tls = make_tls(workdir)
        receiver = start_receiver(stack, workdir, tls.server_pem, busy_roles(ENDPOINTS))
        print(
            f"{options.events:,} events × {ENDPOINTS} endpoints a run, one worker, alone and "
            f"beside an endpoint answering 429 to every other request, {pairs} of each, "
            "each in a fresh database"
        )
        for name in options.databases:
            runs: dict[str | None, list[Drain]] = {kind: [] for kind in KINDS}
            for pair in range(pairs):
                for kind in KINDS if pair % 2 == 0 else KINDS[::-1]:
                    folder = workdir / f"{name}-{pair}-{kind or 'alone'}"
                    drain = fresh_run(name, folder, tls, receiver, options, kind)
                    runs[kind].append(drain)
                    lost += drain.lost
            report(name, runs)
    return lost == 0


def main(argv: list[str] | None = None) -> int:
    options, pairs = parse_options(argv)
    return exit_status(PROG, lambda: bench(options, pairs))


if __name__ == "__main__":
    sys.exit(main())
