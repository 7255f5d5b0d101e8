"""Publishing over HTTP, for ``bench/publish.py``: a real ``clubwire serve`` and the bare
publisher (``bare_publisher.py``) side by side on one database, driven by client processes.

Each client is a process of its own (forked before the benchmark opens any database
connection) with one keep-alive connection, sending request after request (``http.client``:
a few tens of µs of CPU a request, against milliseconds of the server's) from a common start
to a common stop; the run's events/s is what all of them got answered 201 over the time from
that start to the last answer. Each client's own CPU time is summed, so the report shows what
the clients cost per event: on two cores they share the machine with the server and the
database, so a client side that cost much would hold the server back.
"""

from __future__ import annotations

import functools
import http.client
import multiprocessing
import secrets
import socket
import sys
import time
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from multiprocessing.pool import Pool
from pathlib import Path
from typing import NamedTuple

import orjson

from api import start_ours
from harness import HOST, BenchError, free_ports, start, wait_answering
from testbed import Bed

TOKEN = secrets.token_urlsafe(24)  # the platform token of the benchmark's serve
START_DELAY = 0.3  # seconds from handing out the work to the clients' common start
SINGLE, BATCH = "single", "batch"
BATCH_SIZE = 100


@dataclass(frozen=True)
class Load:
    """What a run sends: each request's body, and the events one request carries."""

    bodies: list[bytes]
    events_per_request: int


def loads(samples: Sequence[tuple[str, object]]) -> dict[str, Load]:
    """The samples as single publishes, and as batches of ``BATCH_SIZE``."""
    single = [orjson.dumps({"event": kind, "data": data}) for kind, data in samples]
    items = [{"event": kind, "data": data} for kind, data in samples]
    chunks = [items[at : at + BATCH_SIZE] for at in range(0, len(items), BATCH_SIZE)]
    full = [chunk for chunk in chunks if len(chunk) == BATCH_SIZE]
    if not full:
        raise BenchError(f"--events must be at least {BATCH_SIZE} for the batches")
    batches = [orjson.dumps({"events": chunk}) for chunk in full]
    return {SINGLE: Load(single, 1), BATCH: Load(batches, BATCH_SIZE)}


@dataclass(frozen=True)
class Target:
    """A server to drive: its port, and the path of each load under it."""

    port: int
    paths: dict[str, str]
    headers: dict[str, str]


@dataclass(frozen=True)
class Servers:
    ours: Target
    bare: Target


def start_servers(
    stack: ExitStack, bed: Bed, club_slug: str, club_id: str, endpoint_ids: list[str]
) -> Servers:
    """``clubwire serve`` and the bare publisher on the bed's database, until the stack
    closes. On SQLite the caller holds the worker lock, so ``serve`` runs no worker: the
    benchmark prices publishing, not delivering (``bench/delivery.py`` does that)."""
    ours_port, bare_port = free_ports(2)
    env = {**bed.env, "CLUBWIRE_PLATFORM_TOKEN": TOKEN}
    ours = start_ours(stack, env, bed.workdir, ours_port, log="serve-publish.log")
    script = Path(__file__).with_name("bare_publisher.py")
    command = [sys.executable, str(script), str(bare_port), club_id, ",".join(endpoint_ids)]
    bare = start(stack, command, env, bed.workdir / "bare-publisher.log")
    for process, port in ((ours, ours_port), (bare, bare_port)):
        wait_answering(process, functools.partial(_connect, port), process.log.name)
    events = f"/internal/v1/clubs/{club_slug}/events"
    json = {"Content-Type": "application/json"}
    return Servers(
        ours=Target(
            ours_port,
            {SINGLE: events, BATCH: f"{events}/batch"},
            {**json, "Authorization": f"Bearer {TOKEN}"},
        ),
        bare=Target(bare_port, {SINGLE: "/events", BATCH: "/events/batch"}, json),
    )


def _connect(port: int) -> None:
    socket.create_connection((HOST, port), 1).close()


@dataclass(frozen=True)
class Run:
    events: int  # answered 201
    seconds: float
    client_cpu: float  # all the clients' CPU time, in seconds
    unavailable: int  # requests answered 503 (each client then waited its Retry-After)

    def rate(self) -> float:
        return self.events / self.seconds

    def client_cpu_per_event(self) -> float:
        return self.client_cpu / max(1, self.events) * 1e6


class Sent(NamedTuple):
    """What one client got through: requests answered 201 and 503, its CPU time, and when
    its last request was answered."""

    created: int
    unavailable: int
    cpu: float
    finished: float


def drive(pool: Pool, target: Target, kind: str, load: Load, clients: int, seconds: float) -> Run:
    """``clients`` processes send ``load`` to ``target`` for ``seconds``, all from one start."""
    start_at = time.time() + START_DELAY
    stop_at = start_at + seconds
    path = target.paths[kind]
    bodies = load.bodies
    work = [
        (target.port, path, target.headers, bodies, n * len(bodies) // clients, start_at, stop_at)
        for n in range(clients)
    ]
    done: list[Sent] = pool.starmap(client, work, chunksize=1)
    return Run(
        sum(sent.created for sent in done) * load.events_per_request,
        max(sent.finished for sent in done) - start_at,
        sum(sent.cpu for sent in done),
        sum(sent.unavailable for sent in done),
    )


def client(
    port: int,
    path: str,
    headers: dict[str, str],
    bodies: list[bytes],
    first: int,
    start_at: float,
    stop_at: float,
) -> Sent:
    """One client: requests one after another on one connection, from ``start_at`` until
    ``stop_at``, the bodies in turn from ``first``. A 503 (the database busy past its
    timeout: SQLite's writers queue for one lock) is waited out as its Retry-After says, as
    a platform would, and counted; any other answer but 201 ends the benchmark."""
    connection = http.client.HTTPConnection(HOST, port, timeout=60)
    connection.connect()
    time.sleep(max(0.0, start_at - time.time()))
    cpu, created, unavailable = time.process_time(), 0, 0
    try:
        while time.time() < stop_at:
            sent = created + unavailable
            connection.request("POST", path, bodies[(first + sent) % len(bodies)], headers)
            answer = connection.getresponse()
            body = answer.read()
            if answer.status == 201:
                created += 1
            elif answer.status == 503:
                unavailable += 1
                wait = float(answer.headers.get("Retry-After") or 1)
                time.sleep(max(0.0, min(wait, stop_at - time.time())))
            else:
                raise BenchError(f"POST {path}: {answer.status} {body[:300]!r}")
    finally:
        connection.close()
    return Sent(created, unavailable, time.process_time() - cpu, time.time())


def check(target: Target, kind: str, load: Load) -> None:
    """One request of ``load``, answered 201 with as many ids as it sent events."""
    connection = http.client.HTTPConnection(HOST, target.port, timeout=60)
    try:
        connection.request("POST", target.paths[kind], load.bodies[0], target.headers)
        answer = connection.getresponse()
        body = answer.read()
    finally:
        connection.close()
    if answer.status != 201:
        raise BenchError(f"POST {target.paths[kind]}: {answer.status} {body[:300]!r}")
    found = orjson.loads(body)
    made = len(found["events"]) if kind == BATCH else 1
    if made != load.events_per_request:
        raise BenchError(f"POST {target.paths[kind]}: {made} events answered")


def processes(stack: ExitStack, count: int) -> Pool:
    """``count`` client processes, forked now (before any database connection exists, so
    that none is shared with them); ended when the stack closes."""
    pool = multiprocessing.get_context("fork").Pool(count)
    stack.callback(pool.terminate)
    return pool
