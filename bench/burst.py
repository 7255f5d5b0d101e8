"""How long does each event of a burst wait before its receivers get it?

``bench/delivery.py`` measures how fast a worker drains a backlog published while no worker
runs; this script measures what a receiver sees when the platform publishes a burst while a
worker runs (issue 31): ``--events`` events (2,000) of every kind in turn, each fanned out to
``--endpoints`` endpoints (5), published at once by ``--publishers`` clients (8), each with a
keep-alive connection to a ``clubwire serve`` (``POST /internal/v1/clubs/{slug}/events``, as
the platform publishes), beside one idle ``clubwire worker`` (on SQLite, the serve's own
worker delivers).

For each delivery, latency is the receiver's first arrival minus the time its publish was
answered (one machine, one clock; the commit is a little earlier). The report gives p50, p95 and p99
over all deliveries, and deliveries/s from the first commit to the last arrival: a worker
that waits to gather larger batches makes each event wait, one that cannot keep up makes the
whole burst take longer. Targets (issue 31, PostgreSQL): p50 at most 40 ms and p95 at most
100 ms, without losing the throughput of the code before it. The runs repeat ``--rounds``
times (3) in a fresh database each, and the median round counts.

Run from the repository root: ``.venv/bin/python bench/burst.py [--database postgresql]
[--events 2000] [--endpoints 5] [--publishers 8] [--rounds 3]``.
"""

from __future__ import annotations

import argparse
import http.client
import random
import secrets
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import orjson
from sqlalchemy import select

from clubwire.domain import event_catalog, timestamps
from clubwire.storage.models import Delivery
from harness import HOST, START_TIMEOUT, BenchError, Process, exit_status, free_ports, start
from measuring import expected_deliveries, wait_for
from receiver import Receiver, busy_roles, healthy_roles, start_receiver
from testbed import (
    BUSY_CLUB,
    KINDS,
    SEED,
    Bed,
    Clubs,
    make_tls,
    prepare_bed,
    seed,
    wait_started,
    worker,
)

PROG = "bench/burst.py"
DATABASES = ("sqlite", "postgresql")
IDLE_SECONDS = 1.0  # the worker idles this long before the burst
POSTGRES_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PLATFORM_TOKEN = secrets.token_urlsafe(32)  # the internal API of the bench's own server


@dataclass(frozen=True)
class Options:
    databases: list[str]
    events: int
    endpoints: int
    publishers: int
    rounds: int
    postgres_url: str


@dataclass(frozen=True)
class Burst:
    """One round: each delivery's latency in ms, and the whole burst's deliveries/s."""

    latencies_ms: list[float]
    rate: float
    lost: int

    def quantile(self, share: float) -> float:
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] if ordered else 0.0


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="postgresql")
    parser.add_argument("--events", type=int, default=2000, help="events in the burst (2000)")
    parser.add_argument("--endpoints", type=int, default=5, help="endpoints (5)")
    parser.add_argument("--publishers", type=int, default=8, help="publishing threads (8)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (3)")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    args = parser.parse_args(argv)
    if min(args.events, args.endpoints, args.publishers, args.rounds) < 1:
        parser.error("--events, --endpoints, --publishers and --rounds must be at least 1")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(
        databases, args.events, args.endpoints, args.publishers, args.rounds, args.postgres_url
    )


def publish_burst(port: int, options: Options) -> dict[str, float]:
    """The burst, from ``options.publishers`` clients of the internal API; when each publish
    was answered (``time.time``), by event id."""
    committed: dict[str, float] = {}
    numbers = iter(range(options.events))
    lock = threading.Lock()

    def publishing(seed_: int) -> None:
        rng = random.Random(seed_)
        connection = http.client.HTTPConnection(HOST, port, timeout=30)
        while True:
            with lock:
                number = next(numbers, None)
            if number is None:
                connection.close()
                return
            event_id, answered = publish(connection, BUSY_CLUB, number, rng, PLATFORM_TOKEN)
            committed[event_id] = answered

    threads = [
        threading.Thread(target=publishing, args=(SEED + n,)) for n in range(options.publishers)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return committed


def publish(
    connection: http.client.HTTPConnection, slug: str, number: int, rng: random.Random, token: str
) -> tuple[str, float]:
    """Publish the ``number``-th event (kinds in turn) over the internal API; its id, and
    when it was answered (``time.time``)."""
    kind = KINDS[number % len(KINDS)]
    body = orjson.dumps(
        {"event": kind, "data": event_catalog.sample(kind, timestamps.utc_now(), rng)}
    )
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connection.request("POST", f"/internal/v1/clubs/{slug}/events", body, headers)
    answer = connection.getresponse()
    answered = time.time()
    published = orjson.loads(answer.read())
    if answer.status != 201:
        raise BenchError(f"a publish to {slug} was answered {answer.status}: {published}")
    return str(published["id"]), answered


def burst_round(bed: Bed, receiver: Receiver, clubs_: Clubs, options: Options, label: str) -> Burst:
    """A server and an idle worker (on SQLite, the server's own), then the burst; each
    delivery's latency at the receiver."""
    since = timestamps.utc_now()
    (port,) = free_ports(1)
    with ExitStack() as stack:
        senders = [serve(stack, bed, port, label)]
        if bed.name == "postgresql":  # on SQLite a second worker would find the lock taken
            senders.append(stack.enter_context(worker(bed, label)))
            wait_started(senders[-1])
        time.sleep(IDLE_SECONDS)
        receiver.reset()
        committed = publish_burst(port, options)
        expected = expected_deliveries(bed, clubs_, since)
        arrived = wait_for(receiver, expected, senders)
    event_of = deliveries_events(bed, clubs_, since)
    latencies, last = [], 0.0
    for role, ids in expected.items():
        for delivery_id in ids & arrived.get(role, {}).keys():
            at = arrived[role][delivery_id]
            latencies.append((at - committed[event_of[delivery_id]]) * 1000)
            last = max(last, at)
    lost = sum(len(ids) for ids in expected.values()) - len(latencies)
    seconds = last - min(committed.values())
    return Burst(latencies, len(latencies) / seconds if seconds > 0 else 0.0, lost)


def serve(stack: ExitStack, bed: Bed, port: int, label: str) -> Process:
    """``clubwire serve`` on the bed with the internal API on, once it answers."""
    env = {**bed.env, "CLUBWIRE_PLATFORM_TOKEN": PLATFORM_TOKEN}
    command = [sys.executable, "-m", "clubwire", "serve", "--host", HOST, "--port", str(port)]
    server = start(stack, command, env, bed.workdir / f"serve-{label}.log")
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        server.check()
        try:
            with urllib.request.urlopen(f"http://{HOST}:{port}/readyz", timeout=1):
                return server
        except OSError:
            if time.monotonic() > deadline:
                raise BenchError("clubwire serve did not answer") from None
            time.sleep(0.1)


def deliveries_events(bed: Bed, clubs_: Clubs, since: datetime) -> dict[str, str]:
    """The event of each of the busy club's deliveries made since ``since``."""
    query = select(Delivery.id, Delivery.event_id).where(
        Delivery.created_at >= since, Delivery.endpoint_id.in_(clubs_.roles)
    )
    with bed.sessions() as session:
        return {delivery: event for delivery, event in session.execute(query)}


def bench(options: Options) -> bool:
    lost = 0
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-burst-")))
        tls = make_tls(workdir)
        receiver = start_receiver(stack, workdir, tls.server_pem, busy_roles(options.endpoints))
        print(
            f"{options.events:,} events x {options.endpoints} endpoints, "
            f"{options.publishers} publishers, {options.rounds} rounds"
        )
        for name in options.databases:
            bursts = []
            for round_ in range(options.rounds):
                with ExitStack() as beds:
                    bed = prepare_bed(
                        beds, name, workdir / f"{name}-{round_}", tls, options.postgres_url
                    )
                    clubs_ = seed(bed, receiver, healthy_roles(options.endpoints))
                    burst = burst_round(bed, receiver, clubs_, options, f"burst-{round_}")
                bursts.append(burst)
                lost += burst.lost
                print(
                    f"  {name} round {round_}: p50 {burst.quantile(0.5):.1f} ms, "
                    f"p95 {burst.quantile(0.95):.1f} ms, p99 {burst.quantile(0.99):.1f} ms, "
                    f"{burst.rate:,.0f} deliveries/s, lost {burst.lost}"
                )
            p50 = statistics.median(b.quantile(0.5) for b in bursts)
            p95 = statistics.median(b.quantile(0.95) for b in bursts)
            rate = statistics.median(b.rate for b in bursts)
            print(f"{name}: median of rounds p50 {p50:.1f} ms p95 {p95:.1f} ms {rate:,.0f}/s")
    return lost == 0


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
