"""How fast does one worker deliver webhooks, measured against a bare aiohttp sender?

Webhook delivery is clubwire's other hot path (DESIGN §6–§8): the worker claims due
deliveries in batches, signs the stored bytes afresh for every attempt, posts them over
HTTPS with aiohttp, and records the attempts in batches. This script measures, on SQLite and
on PostgreSQL, one ``clubwire worker`` process against a local HTTPS receiver:

- **throughput**: N events are published (in a few transactions) while no worker runs, each
  fanned out to M endpoints; then the worker starts and drains that backlog. Deliveries/s is
  the number of distinct deliveries that reached the receiver divided by the time from the
  first to the last arrival, so neither the worker's start-up nor the publishing counts;
- **the ceiling**: in the same run, a bare aiohttp sender (in this process, on the same
  asyncio event loop the worker uses, same TLS trust, keep-alive, same limits in flight:
  ``max_in_flight`` in all and ``max_in_flight_per_endpoint`` per endpoint, same headers with
  a fresh HMAC signature per request) posts the very same stored bodies to the same receiver,
  measured the same way. The ratio ours/bare is what the worker's own work costs (claiming,
  recording, bookkeeping), independent of how fast the machine is;
- **latency at light load**: with the worker running and idle, one event every 20 ms for
  200 events to a club with one endpoint; latency is the receiver's arrival time minus the
  time the publishing transaction committed (one machine, one clock). PostgreSQL workers are
  woken by ``LISTEN/NOTIFY``; on SQLite the worker polls every 25 ms;
- **a receiver that never answers**: the throughput run again with one more endpoint, on a
  path where the receiver reads the request and never responds, subscribed to the same
  events; the healthy endpoints' deliveries/s should fall by less than 10 %.

The receiver is a second process (this file, run as ``delivery.py receive …``): a raw HTTP/1.1
protocol on uvloop over TLS with a trustme certificate for 127.0.0.1, one port per endpoint
(as separate hosts would be), answering ``200 ok``. It records the first arrival time of each
``X-Service-Delivery`` id and reports through a plain HTTP control port. It is lean so that it
is not the bottleneck; both senders share it, so its cost is in both sides of the ratio.

Targets (one worker process, each database): ratio at least 0.4; p50 under 50 ms at light
load; with the silent endpoint, the others' deliveries/s falls by less than 10 %. The last
line of the output is ``ratio <ours/bare>``, the lower of the two databases, two decimals.
The exit status is non-zero when a delivery to a healthy endpoint was lost.

Run from the repository root: ``.venv/bin/python bench/delivery.py [--database both]
[--events 2000] [--endpoints 5]``. PostgreSQL: a database is created for the run and dropped
afterwards, through ``--postgres-url`` (default: the tests' ``CLUBWIRE_TEST_POSTGRES_URL`` or
``postgresql://postgres@127.0.0.1:5432/postgres``).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import secrets
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, cast

import aiohttp
import orjson
import psycopg
import trustme
import uvloop
from psycopg import sql
from pydantic import SecretStr
from sqlalchemy import select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from clubwire import signing
from clubwire.domain import events as catalog
from clubwire.domain import timestamps
from clubwire.services import clubs, endpoints
from clubwire.services import events as publishing
from clubwire.settings import Settings
from clubwire.storage import database, migrate
from clubwire.storage.models import Delivery, Endpoint, Event
from clubwire.worker.attempts import USER_AGENT

PROG = "bench/delivery.py"
RECEIVE = "receive"  # the receiver's own process: ``delivery.py receive …``
HOST = "127.0.0.1"
DATABASES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
POSTGRES_URL = os.environ.get(
    "CLUBWIRE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
BUSY_CLUB, LIGHT_CLUB = "granite", "pebble"
LIGHT, SILENT = "light", "silent"  # receiver roles besides the healthy endpoints e0, e1, …
KINDS = catalog.SUBSCRIBABLE
PUBLISH_BATCH = 500  # events per publishing transaction
LIGHT_EVENTS = 200
LIGHT_INTERVAL = 0.020  # seconds between events at light load
ATTEMPT_TIMEOUT = 5.0  # CLUBWIRE_ATTEMPT_TIMEOUT: silent attempts end within a run
START_TIMEOUT = 30.0
STOP_TIMEOUT = 5.0
STALL_SECONDS = 20.0  # nothing new arrived for this long: the rest is lost
POLL_SECONDS = 0.05
SEED = 20260105
TARGET_RATIO = 0.4
TARGET_P50_MS = 50.0
TARGET_SILENT_DROP = 10.0  # per cent

OK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


class BenchError(Exception):
    """The benchmark cannot go on; the message says why."""


# -- the receiver (its own process) -----------------------------------------------------------


@dataclass
class Arrivals:
    """What reached the receiver: per path, the first arrival (``time.time()``) of each
    delivery id, and how many requests came (duplicates and all)."""

    first: defaultdict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    requests: Counter[str] = field(default_factory=Counter)

    def add(self, path: str, delivery: str, at: float) -> None:
        self.requests[path] += 1
        self.first[path].setdefault(delivery, at)

    def counts(self) -> dict[str, int]:
        return {path: len(ids) for path, ids in self.first.items()}

    def clear(self) -> None:
        self.first.clear()
        self.requests.clear()


class Request(NamedTuple):
    method: bytes
    path: str
    head: bytes
    lowered: bytes  # the head in lower case, to find header names in


def take_request(buffer: bytearray) -> Request | None:
    """The first complete request in ``buffer``, removed from it; None while incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end])
    lowered = head.lower()
    total = end + 4 + int(header(head, lowered, b"content-length") or b"0")
    if len(buffer) < total:
        return None
    del buffer[:total]
    method, _, rest = head.partition(b"\r\n")[0].partition(b" ")
    return Request(method, rest.partition(b" ")[0].decode("latin-1"), head, lowered)


def header(head: bytes, lowered: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case), or None."""
    at = lowered.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    stop = head.find(b"\r\n", start)
    return head[start : stop if stop >= 0 else len(head)].strip()


class Hooks(asyncio.Protocol):
    """One sender's connection: record each request; answer 200, or never on ``/silent``."""

    def __init__(self, arrivals: Arrivals) -> None:
        self._arrivals = arrivals
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._silent = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self._buffer += data
        while (request := take_request(self._buffer)) is not None:
            delivery = header(request.head, request.lowered, b"x-service-delivery") or b"-"
            self._arrivals.add(request.path, delivery.decode("latin-1"), now)
            self._silent = self._silent or request.path == f"/{SILENT}"
            if not self._silent and self._transport is not None:
                self._transport.write(OK_RESPONSE)


class Control(asyncio.Protocol):
    """Plain HTTP for the benchmark: ``GET /counts``, ``GET /arrivals``, ``POST /reset``."""

    def __init__(self, arrivals: Arrivals) -> None:
        self._arrivals = arrivals
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        request = take_request(self._buffer)
        if request is None or self._transport is None:
            return
        status, body = self._answer(request)
        self._transport.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        self._transport.close()

    def _answer(self, request: Request) -> tuple[str, bytes]:
        if request.path == "/counts":
            return "200 OK", orjson.dumps(self._arrivals.counts())
        if request.path == "/arrivals":
            return "200 OK", orjson.dumps(self._arrivals.first)
        if request.path == "/reset" and request.method == b"POST":
            self._arrivals.clear()
            return "200 OK", b"{}"
        return "404 Not Found", b"{}"


async def serve_receiver(cert: Path, control: int, ports: list[int]) -> None:
    """Serve until SIGTERM or SIGINT."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert)
    arrivals = Arrivals()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    servers = [
        await loop.create_server(lambda: Hooks(arrivals), HOST, port, ssl=context, backlog=1024)
        for port in ports
    ]
    servers.append(await loop.create_server(lambda: Control(arrivals), HOST, control))
    await stop.wait()
    for server in servers:
        server.close()


def receive(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog=f"{PROG} {RECEIVE}")
    parser.add_argument("--cert", type=Path, required=True, help="key and certificate chain")
    parser.add_argument("--control", type=int, required=True, help="plain HTTP control port")
    parser.add_argument("--ports", required=True, help="TLS ports, separated by commas")
    args = parser.parse_args(argv)
    ports = [int(port) for port in args.ports.split(",")]
    uvloop.run(serve_receiver(args.cert, args.control, ports))
    return 0


# -- processes --------------------------------------------------------------------------------


def free_ports(count: int) -> list[int]:
    """Ports nobody listens on, all different (the probes are held open together)."""
    with ExitStack() as stack:
        probes = [stack.enter_context(socket.socket()) for _ in range(count)]
        for probe in probes:
            probe.bind((HOST, 0))
        return [int(probe.getsockname()[1]) for probe in probes]


@dataclass(frozen=True)
class Process:
    """A process we started, and the file its output goes to."""

    popen: subprocess.Popen[bytes]
    log: Path
    stop_timeout: float = STOP_TIMEOUT

    def stop(self) -> None:
        """Terminate, and kill if it is still there after ``stop_timeout`` seconds."""
        if self.popen.poll() is not None:
            return
        self.popen.terminate()
        try:
            self.popen.wait(self.stop_timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()

    def check(self) -> None:
        """Raise if the process is gone."""
        if self.popen.poll() is not None:
            raise BenchError(f"{self.log.name}: the process exited:\n{self.tail()}")

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])


def start(
    stack: ExitStack,
    command: list[str],
    env: dict[str, str],
    log: Path,
    stop_timeout: float = STOP_TIMEOUT,
) -> Process:
    """Start a process whose output goes to ``log``; the stack stops it, whatever happens."""
    output = stack.enter_context(log.open("wb"))
    popen = subprocess.Popen(command, env=env, cwd=log.parent, stdout=output, stderr=output)
    process = Process(popen, log, stop_timeout)
    stack.callback(process.stop)
    return process


@dataclass(frozen=True)
class Tls:
    """The test CA (``CLUBWIRE_CA_BUNDLE``) and the receiver's key and certificate chain."""

    bundle: Path
    server_pem: Path


def make_tls(workdir: Path) -> Tls:
    ca = trustme.CA()
    tls = Tls(workdir / "ca.pem", workdir / "receiver.pem")
    ca.cert_pem.write_to_path(str(tls.bundle))
    ca.issue_cert(HOST).private_key_and_cert_chain_pem.write_to_path(str(tls.server_pem))
    return tls


@dataclass(frozen=True)
class Receiver:
    """The receiver process, its control port and one TLS port per role."""

    process: Process
    control: int
    ports: dict[str, int]

    def url(self, role: str) -> str:
        return f"https://{HOST}:{self.ports[role]}/{role}"

    def counts(self) -> dict[str, int]:
        """Distinct deliveries that arrived, by role."""
        return {path[1:]: n for path, n in orjson.loads(self._call("GET", "/counts")).items()}

    def arrivals(self) -> dict[str, dict[str, float]]:
        """By role: each delivery id's first arrival time."""
        found = orjson.loads(self._call("GET", "/arrivals"))
        return {path[1:]: times for path, times in found.items()}

    def reset(self) -> None:
        self._call("POST", "/reset")

    def _call(self, method: str, path: str) -> bytes:
        url = f"http://{HOST}:{self.control}{path}"
        request = urllib.request.Request(url, method=method)  # noqa: S310 (a local URL)
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310
            return bytes(response.read())


def start_receiver(stack: ExitStack, workdir: Path, tls: Tls, roles: list[str]) -> Receiver:
    """Start the receiver and wait until its control port answers."""
    control, *ports = free_ports(len(roles) + 1)
    command = [sys.executable, __file__, RECEIVE, "--cert", str(tls.server_pem)]
    command += ["--control", str(control), "--ports", ",".join(map(str, ports))]
    process = start(stack, command, dict(os.environ), workdir / "receiver.log")
    receiver = Receiver(process, control, dict(zip(roles, ports, strict=True)))
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        process.check()
        try:
            receiver.counts()
        except OSError:
            time.sleep(0.1)
        else:
            return receiver
    raise BenchError(f"the receiver did not start within {START_TIMEOUT:.0f} s")


# -- databases --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Options:
    databases: list[str]
    events: int
    endpoints: int
    postgres_url: str


@dataclass(frozen=True)
class Bed:
    """One database ready for the benchmark: settings, sessions, and the worker's environment."""

    name: str
    settings: Settings
    sessions: sessionmaker[Session]
    env: dict[str, str]
    workdir: Path


def postgres_database(stack: ExitStack, admin_url: str) -> str:
    """A fresh database, dropped when the stack closes; returns its URL."""
    name = f"clubwire_bench_{secrets.token_hex(4)}"
    try:
        with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    except psycopg.Error as exc:
        raise BenchError(f"cannot create a PostgreSQL database at {admin_url}: {exc}") from exc
    stack.callback(drop_postgres_database, admin_url, name)
    return make_url(admin_url).set(database=name).render_as_string(hide_password=False)


def drop_postgres_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True, connect_timeout=3) as admin:
        admin.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def prepare_bed(stack: ExitStack, name: str, workdir: Path, tls: Tls, options: Options) -> Bed:
    """A migrated database (a SQLite file in ``workdir``, or a fresh PostgreSQL database)."""
    workdir.mkdir()
    if name == "sqlite":
        url = f"sqlite:///{workdir / 'bench.db'}"
    else:
        url = postgres_database(stack, options.postgres_url)
    secret_key = secrets.token_urlsafe(30)
    settings = Settings(
        database_url=url,
        home=workdir,
        secret_key=SecretStr(secret_key),
        allow_private_targets=True,
        ca_bundle=tls.bundle,
        attempt_timeout=ATTEMPT_TIMEOUT,
        _env_file=None,
    )
    engine = database.engine_for(settings)
    stack.callback(engine.dispose)
    migrate.upgrade(engine)
    return Bed(name, settings, database.sessions(engine), worker_environment(settings), workdir)


def worker_environment(settings: Settings) -> dict[str, str]:
    """The parent's environment without its CLUBWIRE_* settings, plus the benchmark's."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CLUBWIRE_")}
    env.update(
        {
            "CLUBWIRE_DATABASE_URL": settings.database_url,
            "CLUBWIRE_HOME": str(settings.home),
            "CLUBWIRE_SECRET_KEY": settings.secret_key_value(),
            "CLUBWIRE_ALLOW_PRIVATE_TARGETS": "true",
            "CLUBWIRE_CA_BUNDLE": str(settings.ca_bundle),
            "CLUBWIRE_ATTEMPT_TIMEOUT": str(settings.attempt_timeout),
            "CLUBWIRE_MAX_IN_FLIGHT": str(settings.max_in_flight),
            "CLUBWIRE_MAX_IN_FLIGHT_PER_ENDPOINT": str(settings.max_in_flight_per_endpoint),
        }
    )
    return env


@contextmanager
def worker(bed: Bed, label: str) -> Iterator[Process]:
    """One ``clubwire worker`` process for the block; stopped gracefully at its end."""
    with ExitStack() as stack:
        command = [sys.executable, "-m", "clubwire", "worker"]
        log = bed.workdir / f"worker-{label}.log"
        stop_timeout = bed.settings.attempt_timeout + 2 * STOP_TIMEOUT
        yield start(stack, command, bed.env, log, stop_timeout)


# -- clubs, endpoints, events -----------------------------------------------------------------


@dataclass(frozen=True)
class Clubs:
    busy_id: str  # the healthy endpoints e0, e1, … (and later the silent one)
    light_id: str  # one endpoint, for latency at light load
    signing_secrets: dict[str, str]  # endpoint id → secret


def seed(bed: Bed, receiver: Receiver, healthy: list[str]) -> Clubs:
    """Both clubs with their module on, and their endpoints subscribed to every kind."""
    now = timestamps.utc_now()
    signing_secrets = {}
    with bed.sessions.begin() as session:
        busy = new_club(session, BUSY_CLUB)
        light = new_club(session, LIGHT_CLUB)
        for club, role in [(light, LIGHT)] + [(busy, role) for role in healthy]:
            endpoint, secret = endpoints.create_endpoint(
                session, club, receiver.url(role), KINDS, now, bed.settings
            )
            signing_secrets[endpoint.id] = secret
        return Clubs(busy.id, light.id, signing_secrets)


def new_club(session: Session, slug: str) -> clubs.Club:
    now = timestamps.utc_now()
    club = clubs.create_club(session, slug, f"{slug.title()} Curling Club", now)
    clubs.set_webhooks_module(session, slug, True, now)
    return club


def add_silent_endpoint(bed: Bed, receiver: Receiver, club_id: str) -> None:
    with bed.sessions.begin() as session:
        club = clubs.get_club_by_id(session, club_id)
        endpoints.create_endpoint(
            session, club, receiver.url(SILENT), KINDS, timestamps.utc_now(), bed.settings
        )


def publish_backlog(bed: Bed, club_id: str, count: int, rng: random.Random) -> None:
    """``count`` events of every kind in turn, PUBLISH_BATCH to a transaction."""
    for first in range(0, count, PUBLISH_BATCH):
        with bed.sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            for number in range(first, min(count, first + PUBLISH_BATCH)):
                publish_one(session, club, KINDS[number % len(KINDS)], rng)


def publish_one(session: Session, club: clubs.Club, kind: str, rng: random.Random) -> str:
    now = timestamps.utc_now()
    event, _ = publishing.publish(session, club, kind, catalog.sample(kind, now, rng), now)
    return event.id


# -- measuring at the receiver ----------------------------------------------------------------


@dataclass(frozen=True)
class Drain:
    """Deliveries that reached the given endpoints, and over how long."""

    delivered: int  # distinct delivery ids
    expected: int
    seconds: float  # first arrival to last

    @property
    def rate(self) -> float:
        return self.delivered / self.seconds if self.seconds > 0 else 0.0

    @property
    def lost(self) -> int:
        return max(0, self.expected - self.delivered)


def wait_for(
    receiver: Receiver, expected: dict[str, int], sender: Process | None = None
) -> dict[str, dict[str, float]]:
    """Poll until each role has its expected distinct deliveries, or nothing new has arrived
    for STALL_SECONDS; returns the arrivals."""
    seen, changed = -1, time.monotonic()
    while True:
        receiver.process.check()
        if sender is not None:
            sender.check()
        counts = receiver.counts()
        if all(counts.get(role, 0) >= n for role, n in expected.items()):
            return receiver.arrivals()
        total = sum(counts.get(role, 0) for role in expected)
        if total != seen:
            seen, changed = total, time.monotonic()
        elif time.monotonic() - changed > STALL_SECONDS:
            return receiver.arrivals()
        time.sleep(POLL_SECONDS)


def drain_of(arrivals: dict[str, dict[str, float]], roles: list[str], each: int) -> Drain:
    times = [at for role in roles for at in arrivals.get(role, {}).values()]
    seconds = max(times) - min(times) if times else 0.0
    return Drain(len(times), each * len(roles), seconds)


def measure_drain(receiver: Receiver, roles: list[str], each: int, sender: Process) -> Drain:
    """Wait for ``each`` deliveries at every role; the receiver was reset before."""
    arrivals = wait_for(receiver, dict.fromkeys(roles, each), sender)
    return drain_of(arrivals, roles, each)


def light_load(bed: Bed, receiver: Receiver, club_id: str, worker: Process) -> list[float | None]:
    """Publish LIGHT_EVENTS events, one every LIGHT_INTERVAL; each one's latency in ms
    (None where it never arrived)."""
    receiver.reset()
    rng = random.Random(SEED + 1)
    committed: dict[str, float] = {}
    due = time.monotonic()
    for number in range(LIGHT_EVENTS):
        with bed.sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            event_id = publish_one(session, club, KINDS[number % len(KINDS)], rng)
        committed[event_id] = time.time()
        due += LIGHT_INTERVAL
        time.sleep(max(0.0, due - time.monotonic()))
    arrived = wait_for(receiver, {LIGHT: LIGHT_EVENTS}, worker).get(LIGHT, {})
    with bed.sessions() as session:
        query = select(Delivery.id, Delivery.event_id).where(Delivery.club_id == club_id)
        delivery_of = {event_id: delivery_id for delivery_id, event_id in session.execute(query)}
    return [
        (arrived[delivery_of[event_id]] - at) * 1000 if delivery_of[event_id] in arrived else None
        for event_id, at in committed.items()
    ]


# -- the bare sender --------------------------------------------------------------------------


class BareJob(NamedTuple):
    url: str
    endpoint_id: str
    delivery_id: str
    kind: str
    body: bytes
    secret: str


def load_jobs(bed: Bed, clubs_: Clubs) -> list[BareJob]:
    """Every delivery of the busy club so far, in the order the worker claims them."""
    query = (
        select(Endpoint.url, Delivery.endpoint_id, Delivery.id, Event.kind, Event.body)
        .join(Event, Event.id == Delivery.event_id)
        .join(Endpoint, Endpoint.id == Delivery.endpoint_id)
        .where(Delivery.club_id == clubs_.busy_id)
        .order_by(Delivery.next_attempt_at, Delivery.id)
    )
    with bed.sessions() as session:
        return [
            BareJob(url, endpoint_id, delivery_id, kind, body, clubs_.signing_secrets[endpoint_id])
            for url, endpoint_id, delivery_id, kind, body in session.execute(query)
        ]


def bare_headers(job: BareJob) -> dict[str, str]:
    """What the worker sends (DESIGN §6), signed now."""
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Service-Event": job.kind,
        "X-Service-Delivery": job.delivery_id,
        signing.HEADER: signing.sign(job.secret, int(time.time()), job.body),
        "Accept-Encoding": "identity",
    }


async def send_bare(jobs: list[BareJob], settings: Settings) -> int:
    """Post every job, within the worker's limits in flight; returns how many failed."""
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=str(settings.ca_bundle))
    connector = aiohttp.TCPConnector(ssl=context, limit=0, limit_per_host=0)
    timeout = aiohttp.ClientTimeout(
        total=settings.attempt_timeout, sock_connect=settings.connect_timeout
    )
    queues: defaultdict[str, deque[BareJob]] = defaultdict(deque)
    for job in jobs:
        queues[job.endpoint_id].append(job)
    gate = asyncio.Semaphore(settings.max_in_flight)
    failures = Counter[bool]()
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False, trust_env=False
    ) as session:
        lanes = [
            lane(session, queue, gate, failures)
            for queue in queues.values()
            for _ in range(settings.max_in_flight_per_endpoint)
        ]
        await asyncio.gather(*lanes)
    return failures[True]


async def lane(
    session: aiohttp.ClientSession,
    queue: deque[BareJob],
    gate: asyncio.Semaphore,
    failures: Counter[bool],
) -> None:
    """One request at a time to one endpoint, until its queue is empty."""
    while queue:
        job = queue.popleft()
        async with gate:
            try:
                async with session.post(
                    job.url, data=job.body, headers=bare_headers(job), allow_redirects=False
                ) as response:
                    await response.read()
                    failures[not 200 <= response.status < 300] += 1
            except (aiohttp.ClientError, OSError, TimeoutError):
                failures[True] += 1


def bare_run(bed: Bed, receiver: Receiver, clubs_: Clubs, roles: list[str], each: int) -> Drain:
    """The same bodies, to the same endpoints, by the bare sender; measured at the receiver."""
    jobs = load_jobs(bed, clubs_)
    receiver.reset()
    failed = asyncio.run(send_bare(jobs, bed.settings))
    if failed:
        print(f"warning: {bed.name}: the bare sender had {failed:,} failed requests")
    return drain_of(wait_for(receiver, dict.fromkeys(roles, each)), roles, each)


# -- one database -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """Everything measured on one database."""

    database: str
    ours: Drain
    bare: Drain
    latencies_ms: list[float | None]
    silent: Drain

    @property
    def ratio(self) -> float:
        return self.ours.rate / self.bare.rate if self.bare.rate else 0.0

    @property
    def silent_change(self) -> float:
        """The healthy endpoints' deliveries/s with a silent endpoint, change in %."""
        return (self.silent.rate / self.ours.rate - 1) * 100 if self.ours.rate else 0.0

    @property
    def light_lost(self) -> int:
        return sum(latency is None for latency in self.latencies_ms)

    def percentile(self, pct: int) -> float:
        found = sorted(latency for latency in self.latencies_ms if latency is not None)
        if len(found) < 2:
            return found[0] if found else float("nan")
        return statistics.quantiles(found, n=100, method="inclusive")[pct - 1]


def bench_database(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options
) -> Outcome:
    """Throughput and light load, the bare sender, then throughput with a silent endpoint."""
    healthy = healthy_roles(options.endpoints)
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / name, tls, options)
        clubs_ = seed(bed, receiver, healthy)
        rng = random.Random(SEED)
        publish_backlog(bed, clubs_.busy_id, options.events, rng)
        receiver.reset()
        with worker(bed, "throughput") as process:
            ours = measure_drain(receiver, healthy, options.events, process)
            latencies = light_load(bed, receiver, clubs_.light_id, process)
        bare = bare_run(bed, receiver, clubs_, healthy, options.events)
        add_silent_endpoint(bed, receiver, clubs_.busy_id)
        publish_backlog(bed, clubs_.busy_id, options.events, rng)
        receiver.reset()
        with worker(bed, "silent") as process:
            silent = measure_drain(receiver, healthy, options.events, process)
    return Outcome(DATABASES[name], ours, bare, latencies, silent)


def healthy_roles(count: int) -> list[str]:
    return [f"e{number}" for number in range(count)]


# -- report -----------------------------------------------------------------------------------


def verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def describe(drain: Drain) -> str:
    lost = f", {drain.lost:,} LOST" if drain.lost else ""
    return f"{drain.delivered:,} in {drain.seconds:.2f} s{lost}"


def report_setup(options: Options, settings: Settings) -> None:
    deliveries = options.events * options.endpoints
    print(
        f"{options.events:,} events × {options.endpoints} endpoints = {deliveries:,} deliveries "
        "per throughput run, published before the worker starts; deliveries/s = distinct "
        "deliveries / (last arrival − first arrival) at the receiver"
    )
    print(
        f"one worker process (default asyncio loop), {settings.max_in_flight} in flight, "
        f"{settings.max_in_flight_per_endpoint} per endpoint; the bare aiohttp sender uses the "
        "same loop, limits, TLS trust and headers, signed per request"
    )
    print(
        "receiver: its own process, raw HTTP/1.1 over TLS on uvloop, one port per endpoint; "
        f"light load: {LIGHT_EVENTS} events, one every {LIGHT_INTERVAL * 1000:.0f} ms, one "
        "endpoint, latency = arrival − publish commit"
    )


def report(outcome: Outcome) -> None:
    o = outcome
    p50, p99 = o.percentile(50), o.percentile(99)
    light_lost = f", {o.light_lost} LOST" if o.light_lost else ""
    rows = [
        ("clubwire worker", f"{o.ours.rate:,.0f} deliveries/s", describe(o.ours)),
        ("bare aiohttp sender", f"{o.bare.rate:,.0f} deliveries/s", describe(o.bare)),
        ("ratio ours/bare", f"{o.ratio:.2f}", f"target ≥ {TARGET_RATIO}: {verdict_ratio(o)}"),
        (
            "light load p50 / p99",
            f"{p50:.1f} ms / {p99:.1f} ms",
            f"target p50 < {TARGET_P50_MS:.0f} ms: {verdict(p50 < TARGET_P50_MS)}{light_lost}",
        ),
        (
            "+1 silent endpoint",
            f"{o.silent.rate:,.0f} deliveries/s",
            f"to the healthy ones, {o.silent_change:+.1f} % ({describe(o.silent)}); target "
            f"falls < {TARGET_SILENT_DROP:.0f} %: {verdict(o.silent_change > -TARGET_SILENT_DROP)}",
        ),
    ]
    print(f"\n{o.database}")
    for label, value, note in rows:
        print(f"  {label:<22} {value:>22}   {note}")


def verdict_ratio(outcome: Outcome) -> str:
    return verdict(outcome.ratio >= TARGET_RATIO)


def lost_anything(outcome: Outcome) -> bool:
    return any(d.lost for d in (outcome.ours, outcome.bare, outcome.silent)) or bool(
        outcome.light_lost
    )


# -- main -------------------------------------------------------------------------------------


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    parser.add_argument("--events", type=int, default=2000, help="events per run (2000)")
    parser.add_argument("--endpoints", type=int, default=5, help="healthy endpoints (5)")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    args = parser.parse_args(argv)
    most = Settings.model_fields["max_endpoints_per_club"].default - 1  # one left for silent
    if args.events < 1 or not 1 <= args.endpoints <= most:
        parser.error(f"--events must be at least 1 and --endpoints between 1 and {most}")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(databases, args.events, args.endpoints, args.postgres_url)


def bench(options: Options) -> bool:
    """Measure each database and report; returns whether no delivery was lost."""
    outcomes = []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-bench-")))
        tls = make_tls(workdir)
        roles = [*healthy_roles(options.endpoints), LIGHT, SILENT]
        receiver = start_receiver(stack, workdir, tls, roles)
        for index, name in enumerate(options.databases):
            outcome = bench_database(name, workdir, tls, receiver, options)
            if index == 0:
                report_setup(options, Settings(_env_file=None))
            report(outcome)
            outcomes.append(outcome)
    print(f"ratio {min(outcome.ratio for outcome in outcomes):.2f}")
    return not any(lost_anything(outcome) for outcome in outcomes)


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == [RECEIVE]:
        return receive(arguments[1:])
    options = parse_options(arguments)
    try:
        return 0 if bench(options) else 1
    except BenchError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
