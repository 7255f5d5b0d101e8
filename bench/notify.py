"""Do concurrent publishes on PostgreSQL wait for one another's notices?

Issue 38 item 4. A transaction that has queued a ``NOTIFY`` takes, as it commits, one lock for
the whole PostgreSQL instance (``PreCommit_Notify``: an AccessExclusive lock on the shared
object ``pg_database`` 0), held until its commit is flushed, so that notices keep commit order.
Every publish that notified in its own transaction therefore committed one at a time.
Publishes now note their wake-ups and the process's notifier sends them after the commit
(``storage.notices``, ADR 0008).

This script starts a real ``clubwire serve`` on a fresh PostgreSQL database (dropped at the
end), ``--clubs`` clubs with ``--endpoints`` endpoints each, subscribed to every kind (no
worker: the deliveries wait), and publishes over HTTP (``POST
/internal/v1/clubs/<slug>/events``, the clubs in turn) from ``--clients`` counts of
concurrent clients in turn (4, then 16), each client one request at a time, for
``--seconds`` each. (Publishes to one club's endpoints wait for one another anyway: each
locks its endpoints' queue heads until it commits, ADR 0008; with ``--clubs 1`` that shows
as ``Lock/transactionid`` waits.) Meanwhile ``pg_stat_activity`` is sampled every
``--sample-every`` seconds: a session waiting for the notify lock shows ``wait_event_type``
``Lock`` and ``wait_event`` ``object`` (PostgreSQL 15), and, in ``pg_locks``, an ungranted
``object`` lock on ``pg_database`` with objid 0; one waiting for the notification queue
itself an LWLock ``NotifyQueue``, ``NotifyQueueTail``, ``NotifySLRU`` or ``NotifyBuffer``.

A line per client count: events/s, the median and 99th percentile of a publish, the samples
taken and the waits seen in them (every wait event seen, counted by sample and session; the
notifiers' own connections apart, counted on their own: their short transactions are the
only ones that take the lock now). The last line, ``notify waits <n> ratio 16/4 <x.xx>``,
is for scripts; the check passes when no publish was seen waiting for the notify lock or
the queue, and events/s with the most clients is at least that with the fewest.

Run from the repository root: ``.venv/bin/python bench/notify.py [--clients 4 16]
[--seconds 10] [--clubs 32] [--endpoints 5] [--postgres-url URL]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import orjson
import psycopg

import api
from clubwire.storage import notices
from harness import HOST, call, exit_status, free_ports, wait_answering
from publish import make_samples
from testbed import SEED, make_tls, new_club, new_endpoint, prepare_bed, worker_environment

PROG = "bench/notify.py"
PLATFORM_TOKEN = "bench-platform-token-0123456789abcdef"  # noqa: S105 (the bench's own)
NOTIFY_WAITS = frozenset(
    {
        ("Lock", "object"),  # the commit-time lock, on pg_database 0
        ("LWLock", "NotifyQueue"),
        ("LWLock", "NotifyQueueTail"),
        ("LWLock", "NotifySLRU"),
        ("LWLock", "NotifyBuffer"),
    }
)
# Every session of the database that is waiting, and whether it waits for the notify lock;
# the notifiers' own (``storage.notices``) apart: their short transactions are the only ones
# that take the lock now, and may wait for other databases' notices on the instance.
_WAITING = """
SELECT a.wait_event_type, a.wait_event, a.application_name = %s,
    EXISTS (SELECT 1 FROM pg_locks AS l
        WHERE l.pid = a.pid AND NOT l.granted AND l.locktype = 'object'
            AND l.classid = 'pg_database'::regclass AND l.objid = 0)
FROM pg_stat_activity AS a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
    AND a.backend_type = 'client backend' AND a.state = 'active'
    AND a.wait_event_type IS NOT NULL AND a.wait_event_type <> 'Client'
"""


@dataclass(frozen=True)
class Options:
    clients: list[int]
    seconds: float
    clubs: int
    endpoints: int
    sample_every: float
    postgres_url: str


@dataclass
class Round:
    clients: int
    seconds: float
    latencies: list[float]
    failures: Counter[int]
    samples: int
    waits: Counter[tuple[str, str]]
    notify_lock: int  # sessions seen waiting for the notify lock (pg_locks)
    notifier_waits: int  # the notifiers' sessions seen waiting, for anything

    def rate(self) -> float:
        return len(self.latencies) / self.seconds

    def notify_waits(self) -> int:
        return self.notify_lock + sum(n for w, n in self.waits.items() if w in NOTIFY_WAITS)


class Sampler:
    """Samples the database's waiting sessions on a thread of its own while a round runs."""

    def __init__(self, url: str, every: float) -> None:
        self._url = url
        self._every = every
        self._stop = threading.Event()
        self.samples = 0
        self.waits: Counter[tuple[str, str]] = Counter()
        self.notify_lock = 0
        self.notifier_waits = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        with psycopg.connect(self._url, autocommit=True) as connection:
            while not self._stop.wait(self._every):
                for kind, name, notifier, on_notify_lock in connection.execute(
                    _WAITING, (notices.NOTIFIER,)
                ):
                    if notifier:
                        self.notifier_waits += 1
                        continue
                    self.waits[(str(kind), str(name))] += 1
                    self.notify_lock += bool(on_notify_lock)
                self.samples += 1


async def publish_for(
    urls: Sequence[str], bodies: Sequence[bytes], clients: int, seconds: float
) -> tuple[list[float], Counter[int]]:
    """``clients`` concurrent clients, each publishing one event at a time until the time is
    up; each publish's seconds, and the answers that were not 201 by status."""
    latencies: list[float] = []
    failures: Counter[int] = Counter()
    headers = {"Authorization": f"Bearer {PLATFORM_TOKEN}", "Content-Type": "application/json"}
    end = time.monotonic() + seconds

    async def client(session: aiohttp.ClientSession, number: int) -> None:
        turn = number
        while time.monotonic() < end:
            url, body = urls[turn % len(urls)], bodies[turn % len(bodies)]
            turn += clients
            start = time.perf_counter()
            async with session.post(url, data=body, headers=headers) as answer:
                await answer.read()
            if answer.status == 201:
                latencies.append(time.perf_counter() - start)
            else:
                failures[answer.status] += 1

    connector = aiohttp.TCPConnector(limit=clients)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(client(session, n) for n in range(clients)))
    return latencies, failures


def run(options: Options, workdir: Path) -> list[Round]:
    with ExitStack() as stack:
        bed = prepare_bed(
            stack, "postgresql", workdir / "bed", make_tls(workdir), options.postgres_url
        )
        slugs = [f"club-{n}" for n in range(options.clubs)]
        with bed.sessions.begin() as session:
            for slug in slugs:
                club = new_club(session, slug)
                for n in range(options.endpoints):
                    new_endpoint(session, bed, club, f"https://127.0.0.1:{9000 + n}/hooks")
        env = worker_environment(bed.settings) | {"CLUBWIRE_PLATFORM_TOKEN": PLATFORM_TOKEN}
        (port,) = free_ports(1)
        server = api.start_ours(stack, env, bed.workdir, port)
        wait_answering(server, lambda: call(port, "GET", "/readyz"), "clubwire serve")
        rng = random.Random(SEED)
        bodies = [
            orjson.dumps({"event": kind, "data": data}) for kind, data in make_samples(200, rng)
        ]
        urls = [f"http://{HOST}:{port}/internal/v1/clubs/{slug}/events" for slug in slugs]
        asyncio.run(publish_for(urls, bodies, max(options.clients), 1.0))  # warm up
        rounds = []
        for clients in options.clients:
            with Sampler(bed.settings.database_url, options.sample_every) as sampler:
                latencies, failures = asyncio.run(
                    publish_for(urls, bodies, clients, options.seconds)
                )
            rounds.append(
                Round(
                    clients,
                    options.seconds,
                    latencies,
                    failures,
                    sampler.samples,
                    sampler.waits,
                    sampler.notify_lock,
                    sampler.notifier_waits,
                )
            )
        if any(r.failures for r in rounds):
            print("the server's log, its last lines:", server.tail(30), sep="\n")
        return rounds


def report(rounds: list[Round]) -> bool:
    print(f"{'clients':>7} {'events/s':>9} {'p50 ms':>7} {'p99 ms':>7} {'samples':>8}  waits seen")
    for r in rounds:
        cuts = statistics.quantiles(r.latencies, n=100) if len(r.latencies) > 1 else [0.0] * 99
        seen = ", ".join(f"{kind}/{name} {n}" for (kind, name), n in r.waits.most_common())
        failed = f"; not 201: {dict(r.failures)}" if r.failures else ""
        print(
            f"{r.clients:>7} {r.rate():>9,.0f} {cuts[49] * 1000:>7.1f} {cuts[98] * 1000:>7.1f} "
            f"{r.samples:>8}  {seen or 'none'}; on the notify lock {r.notify_lock}; "
            f"the notifier waiting {r.notifier_waits}{failed}"
        )
    waits = sum(r.notify_waits() for r in rounds)
    ratio = rounds[-1].rate() / rounds[0].rate() if rounds[0].rate() else 0.0
    print(f"notify waits {waits} ratio {rounds[-1].clients}/{rounds[0].clients} {ratio:.2f}")
    return waits == 0 and ratio >= 1.0 and not any(r.failures for r in rounds)


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--clients", type=int, nargs="+", default=[4, 16], help="(4 16)")
    parser.add_argument("--seconds", type=float, default=10.0, help="per client count (10)")
    parser.add_argument("--clubs", type=int, default=32, help="clubs published to (32)")
    parser.add_argument("--endpoints", type=int, default=5, help="endpoints a club (5)")
    parser.add_argument(
        "--sample-every", type=float, default=0.01, help="seconds between samples (0.01)"
    )
    parser.add_argument("--postgres-url", default=api.POSTGRES_URL, help="a PostgreSQL server")
    args = parser.parse_args(argv)
    if min([*args.clients, args.clubs]) < 1 or args.seconds <= 0 or args.endpoints < 0:
        parser.error("--clients, --clubs and --seconds must be positive, --endpoints not negative")
    return Options(
        sorted(args.clients),
        args.seconds,
        args.clubs,
        args.endpoints,
        args.sample_every,
        args.postgres_url,
    )


def bench(options: Options) -> bool:
    print(
        f"publishing over HTTP to a clubwire serve on PostgreSQL, {options.clubs} clubs of "
        f"{options.endpoints} endpoints, {options.seconds:.0f} s per client count; "
        f"pg_stat_activity sampled every {options.sample_every * 1000:.0f} ms"
    )
    with tempfile.TemporaryDirectory(prefix="clubwire-notify-") as workdir:
        return report(run(options, Path(workdir)))


def main(argv: list[str] | None = None) -> int:
    return exit_status(PROG, lambda: bench(parse_options(argv)))


if __name__ == "__main__":
    sys.exit(main())
