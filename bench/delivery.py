"""How fast does one worker deliver webhooks, measured against a bare aiohttp sender?

Webhook delivery is clubwire's other hot path (DESIGN §6–§8): the worker claims due
deliveries in batches, signs the stored bytes afresh for every attempt, posts them over
HTTPS with aiohttp, and records the attempts in batches. This script measures, on SQLite and
on PostgreSQL, one ``clubwire worker`` process against a local HTTPS receiver:

- **throughput**: N events are published (in a few transactions) while no worker runs, each
  fanned out to M endpoints; then a worker starts and drains that backlog (a backlog is the
  reproducible way to keep one worker busy; publishing meanwhile would measure the publisher
  too). Deliveries/s is the number of this run's deliveries that reached the receiver divided
  by the time from the first of them to arrive to the last, so neither the worker's start-up
  nor the publishing counts;
- **the ceiling**: in the same run, a bare aiohttp sender (in this process, on the same
  event loop the worker uses (uvloop), same TLS trust, keep-alive, same limits in flight:
  ``max_in_flight`` in all and ``max_in_flight_per_endpoint`` per endpoint, same headers with
  a fresh HMAC signature per request) posts the very same stored bodies to the same receiver,
  measured the same way. The ratio ours/bare is what the worker's own work costs (claiming,
  recording, bookkeeping), independent of how fast the machine is;
- **latency at light load**: with a worker started and idle, one event every 20 ms for 200
  events to a club with one endpoint; latency is the receiver's arrival time minus the time
  the publishing transaction committed (one machine, one clock). PostgreSQL workers are woken
  by ``LISTEN/NOTIFY``; on SQLite the worker polls every 25 ms;
- **a receiver that never answers**: the throughput run again with one more endpoint, on a
  path where the receiver reads the request and never responds, subscribed to the same
  events; the healthy endpoints' deliveries/s should fall by less than 10 %. Attempts time
  out after 2 s here (``CLUBWIRE_ATTEMPT_TIMEOUT``), so the silent endpoint's attempts fail,
  are recorded and make room for the next ones within the run.

The throughput runs go in alternating rounds (``--rounds``, 3): worker, bare sender, worker
with the silent endpoint, the silent run going first every other round so that neither
kind always meets the larger database. The best run of each kind counts, as the machine may
be busy with other work. After each worker stops, the script also checks that every
delivery that reached the receiver is recorded as succeeded ("not recorded": a worker that
loses results sends those deliveries again when their lease runs out). Each run counts only
its own deliveries; others that arrive meanwhile (sent again from earlier runs) are reported
apart.
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
[--events 4000] [--endpoints 5]``. PostgreSQL: a database is created for the run and dropped
afterwards, through ``--postgres-url`` (default: the tests' ``CLUBWIRE_TEST_POSTGRES_URL`` or
``postgresql://postgres@127.0.0.1:5432/postgres``).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import random
import resource
import secrets
import signal
import ssl
import statistics
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict, deque
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import NamedTuple, cast

import aiohttp
import orjson
import psycopg
import trustme
import uvloop
from psycopg import sql
from pydantic import SecretStr
from sqlalchemy import func, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from clubwire import signing
from clubwire.domain import events as catalog
from clubwire.domain import timestamps
from clubwire.domain.deliveries import Status
from clubwire.services import clubs, endpoints
from clubwire.services import events as publishing
from clubwire.settings import Settings
from clubwire.storage import database, migrate
from clubwire.storage.models import Club, Delivery, Endpoint, Event
from clubwire.worker.attempts import USER_AGENT
from harness import HOST, STOP_TIMEOUT, BenchError, Process, exit_status, free_ports, start

PROG = "bench/delivery.py"
RECEIVE = "receive"  # the receiver's own process: ``delivery.py receive …``
DATABASES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
POSTGRES_URL = os.environ.get(
    "CLUBWIRE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
BUSY_CLUB, LIGHT_CLUB = "granite", "pebble"
LIGHT, SILENT = "light", "silent"  # receiver roles besides the healthy endpoints e0, e1, …
SILENT_PATH = f"/{SILENT}"
KINDS = catalog.SUBSCRIBABLE
PUBLISH_BATCH = 500  # events per publishing transaction
LIGHT_EVENTS = 200
LIGHT_INTERVAL = 0.020  # seconds between events at light load
EVENTS = 4000  # per throughput run: with 5 endpoints, 20,000 deliveries, about 5 s a run
ROUNDS = 3  # alternating; the best run of each kind counts
IDLE_SECONDS = 1.0  # a worker idles this long before the light load starts
ATTEMPT_TIMEOUT = 2.0  # CLUBWIRE_ATTEMPT_TIMEOUT: silent attempts time out within a run
START_TIMEOUT = 30.0
STALL_SECONDS = 20.0  # nothing new arrived for this long: the rest is lost
POLL_SECONDS = 0.05
SEED = 20260105
TARGET_RATIO = 0.4
TARGET_P50_MS = 50.0
TARGET_SILENT_DROP = 10.0  # per cent

OK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"


# -- the receiver (its own process) -----------------------------------------------------------


@dataclass
class Arrivals:
    """What reached the receiver: per path, the first arrival (``time.time()``) of each
    delivery id."""

    first: defaultdict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))

    def add(self, path: str, delivery: str, at: float) -> None:
        self.first[path].setdefault(delivery, at)

    def counts(self) -> dict[str, int]:
        return {path: len(ids) for path, ids in self.first.items()}

    def clear(self) -> None:
        self.first.clear()


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
            self._silent = self._silent or request.path == SILENT_PATH
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
        request = urllib.request.Request(url, method=method)
        with urllib.request.urlopen(request, timeout=10) as response:  # noqa: S310 (local)
            return bytes(response.read())


def start_receiver(stack: ExitStack, workdir: Path, tls: Tls, roles: list[str]) -> Receiver:
    """Start the receiver and wait until its control port answers."""
    control, *ports = free_ports(len(roles) + 1)
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        RECEIVE,
        "--cert",
        str(tls.server_pem),
    ]
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
    rounds: int
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
    busy_id: str  # the healthy endpoints e0, e1, … and the silent one
    light_id: str  # one endpoint, for latency at light load
    silent_id: str  # the endpoint that never gets an answer (off until scenario 2)
    signing_secrets: dict[str, str]  # healthy endpoint id → secret
    roles: dict[str, str]  # healthy endpoint id → receiver role


def seed(bed: Bed, receiver: Receiver, healthy: list[str]) -> Clubs:
    """Both clubs with their module on, and their endpoints subscribed to every kind."""
    signing_secrets, roles = {}, {}
    with bed.sessions.begin() as session:
        busy = new_club(session, BUSY_CLUB)
        light = new_club(session, LIGHT_CLUB)
        for role in healthy:
            endpoint, secret = new_endpoint(session, bed, busy, receiver.url(role))
            signing_secrets[endpoint.id], roles[endpoint.id] = secret, role
        new_endpoint(session, bed, light, receiver.url(LIGHT))
        silent, _ = new_endpoint(session, bed, busy, receiver.url(SILENT))
        return Clubs(busy.id, light.id, silent.id, signing_secrets, roles)


def new_endpoint(session: Session, bed: Bed, club: Club, url: str) -> tuple[Endpoint, str]:
    return endpoints.create_endpoint(session, club, url, KINDS, timestamps.utc_now(), bed.settings)


def new_club(session: Session, slug: str) -> Club:
    now = timestamps.utc_now()
    club = clubs.create_club(session, slug, f"{slug.title()} Curling Club", now)
    clubs.set_webhooks_module(session, slug, True, now)
    return club


def switch_silent(bed: Bed, clubs_: Clubs, on: bool) -> None:
    """Switch the silent endpoint on or off (its waiting deliveries are then skipped)."""
    now = timestamps.utc_now()
    with bed.sessions.begin() as session:
        if on:
            endpoints.enable_endpoint(session, clubs_.busy_id, clubs_.silent_id, now)
        else:
            endpoints.disable_endpoint(session, clubs_.busy_id, clubs_.silent_id, now)


def publish_backlog(bed: Bed, club_id: str, count: int, rng: random.Random) -> None:
    """``count`` events of every kind in turn, PUBLISH_BATCH to a transaction."""
    for first in range(0, count, PUBLISH_BATCH):
        with bed.sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            for number in range(first, min(count, first + PUBLISH_BATCH)):
                publish_one(session, club, KINDS[number % len(KINDS)], rng)


def publish_one(session: Session, club: Club, kind: str, rng: random.Random) -> str:
    now = timestamps.utc_now()
    event, _ = publishing.publish(session, club, kind, catalog.sample(kind, now, rng), now)
    return event.id


# -- measuring at the receiver ----------------------------------------------------------------


@dataclass(frozen=True)
class Drain:
    """This run's deliveries that reached the receiver, and over how long."""

    expected: int
    seconds: float  # first arrival to last
    delivered: frozenset[str] = field(repr=False)  # the ids that arrived
    resent: int = 0  # other deliveries that arrived meanwhile (from earlier runs)
    cpu_seconds: float | None = None  # the sender's CPU time (user + system) meanwhile

    @property
    def rate(self) -> float:
        return len(self.delivered) / self.seconds if self.seconds > 0 else 0.0

    @property
    def cpu_per_delivery(self) -> float | None:
        """The sender's CPU time per delivery, in µs: less sensitive to other load."""
        if self.cpu_seconds is None or not self.delivered:
            return None
        return self.cpu_seconds / len(self.delivered) * 1e6

    @property
    def lost(self) -> int:
        return self.expected - len(self.delivered)


Expected = dict[str, set[str]]  # receiver role → delivery ids
Arrived = dict[str, dict[str, float]]  # receiver role → delivery id → first arrival


def wait_for(receiver: Receiver, expected: Expected, sender: Process | None = None) -> Arrived:
    """Poll until every expected delivery has arrived, or nothing new has arrived for
    STALL_SECONDS; returns the arrivals."""
    seen, changed = -1, time.monotonic()
    while True:
        receiver.process.check()
        if sender is not None:
            sender.check()
        counts = receiver.counts()
        if all(counts.get(role, 0) >= len(ids) for role, ids in expected.items()):
            arrived = receiver.arrivals()
            if all(ids <= arrived.get(role, {}).keys() for role, ids in expected.items()):
                return arrived
        total = sum(counts.get(role, 0) for role in expected)
        if total != seen:
            seen, changed = total, time.monotonic()
        elif time.monotonic() - changed > STALL_SECONDS:
            return receiver.arrivals()
        time.sleep(POLL_SECONDS)


def drain_of(arrived: Arrived, expected: Expected) -> Drain:
    times = {
        delivery: at
        for role, ids in expected.items()
        for delivery, at in arrived.get(role, {}).items()
        if delivery in ids
    }
    others = sum(len(arrived.get(role, {}).keys() - ids) for role, ids in expected.items())
    seconds = max(times.values()) - min(times.values()) if times else 0.0
    total = sum(len(ids) for ids in expected.values())
    return Drain(total, seconds, frozenset(times), others)


def measure_drain(receiver: Receiver, expected: Expected, sender: Process) -> Drain:
    """Wait for the expected deliveries, with the sender's CPU time from now to then; the
    receiver was reset before."""
    before = process_cpu(sender.popen.pid)
    drain = drain_of(wait_for(receiver, expected, sender), expected)
    after = process_cpu(sender.popen.pid)
    if before is None or after is None:
        return drain
    return dataclasses.replace(drain, cpu_seconds=after - before)


def process_cpu(pid: int) -> float | None:
    """User plus system CPU seconds of a running process (Linux); None where unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def expected_deliveries(bed: Bed, clubs_: Clubs, since: datetime) -> Expected:
    """The healthy endpoints' deliveries created since ``since``, by receiver role."""
    query = select(Delivery.id, Delivery.endpoint_id).where(
        Delivery.created_at >= since, Delivery.endpoint_id.in_(clubs_.roles)
    )
    expected: Expected = {role: set() for role in clubs_.roles.values()}
    with bed.sessions() as session:
        for delivery_id, endpoint_id in session.execute(query):
            expected[clubs_.roles[endpoint_id]].add(delivery_id)
    return expected


def not_recorded(bed: Bed, delivered: frozenset[str]) -> int:
    """How many of these deliveries, which reached the receiver, the database does not show
    as succeeded (read after the worker stopped, so every attempt should be recorded)."""
    ids = sorted(delivered)
    succeeded = 0
    with bed.sessions() as session:
        for first in range(0, len(ids), PUBLISH_BATCH):
            query = select(func.count()).where(
                Delivery.id.in_(ids[first : first + PUBLISH_BATCH]),
                Delivery.status == Status.SUCCEEDED,
            )
            succeeded += session.scalar(query) or 0
    return len(ids) - succeeded


@dataclass(frozen=True)
class Light:
    """The light-load run: each event's latency in ms (None: it never arrived)."""

    latencies_ms: list[float | None]
    delivered: frozenset[str]


def light_load(bed: Bed, receiver: Receiver, club_id: str, sender: Process) -> Light:
    """Publish LIGHT_EVENTS events, one every LIGHT_INTERVAL, and wait for them."""
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
    with bed.sessions() as session:
        query = select(Delivery.event_id, Delivery.id).where(Delivery.club_id == club_id)
        delivery_of = {event: delivery for event, delivery in session.execute(query)}
    arrived = wait_for(receiver, {LIGHT: set(delivery_of.values())}, sender).get(LIGHT, {})
    latencies = [
        (arrived[delivery_of[event]] - at) * 1000 if delivery_of[event] in arrived else None
        for event, at in committed.items()
    ]
    return Light(latencies, frozenset(arrived.keys() & set(delivery_of.values())))


# -- the bare sender --------------------------------------------------------------------------


class BareJob(NamedTuple):
    url: str
    endpoint_id: str
    delivery_id: str
    kind: str
    body: bytes
    secret: str


def load_jobs(bed: Bed, clubs_: Clubs, since: datetime) -> list[BareJob]:
    """The healthy endpoints' deliveries created since ``since``, in the order of creation
    (the order the worker claims them in)."""
    query = (
        select(Endpoint.url, Delivery.endpoint_id, Delivery.id, Event.kind, Event.body)
        .join(Event, Event.id == Delivery.event_id)
        .join(Endpoint, Endpoint.id == Delivery.endpoint_id)
        .where(
            Delivery.created_at >= since,
            Delivery.endpoint_id.in_(clubs_.signing_secrets),
        )
        .order_by(Delivery.created_at, Delivery.id)
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


def bare_run(bed: Bed, receiver: Receiver, clubs_: Clubs, since: datetime) -> Drain:
    """The same bodies, to the same endpoints, by the bare sender; measured at the receiver."""
    jobs = load_jobs(bed, clubs_, since)
    expected: Expected = {role: set() for role in clubs_.roles.values()}
    for job in jobs:
        expected[clubs_.roles[job.endpoint_id]].add(job.delivery_id)
    receiver.reset()
    before = own_cpu()
    failed = uvloop.run(send_bare(jobs, bed.settings))
    cpu_seconds = own_cpu() - before
    if failed:
        print(f"warning: {bed.name}: the bare sender had {failed:,} failed requests")
    drain = drain_of(wait_for(receiver, expected), expected)
    return dataclasses.replace(drain, cpu_seconds=cpu_seconds)


# -- one database -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """Everything measured on one database: each throughput run, by round."""

    database: str
    ours: list[Drain] = field(default_factory=list)
    bare: list[Drain] = field(default_factory=list)
    silent: list[Drain] = field(default_factory=list)
    light: Light = field(default_factory=lambda: Light([], frozenset()))
    unrecorded: int = 0  # reached the receiver, yet not recorded as succeeded
    delivered_by_worker: int = 0

    @property
    def ratio(self) -> float:
        bare = best(self.bare).rate
        return best(self.ours).rate / bare if bare else 0.0

    @property
    def silent_change(self) -> float:
        """The healthy endpoints' deliveries/s with a silent endpoint, change in %."""
        ours = best(self.ours).rate
        return (best(self.silent).rate / ours - 1) * 100 if ours else 0.0

    @property
    def ratio_met(self) -> bool:
        return self.ratio >= TARGET_RATIO

    @property
    def p50_met(self) -> bool:
        return self.percentile(50) < TARGET_P50_MS

    @property
    def silent_met(self) -> bool:
        return self.silent_change > -TARGET_SILENT_DROP

    @property
    def light_lost(self) -> int:
        return sum(latency is None for latency in self.light.latencies_ms)

    @property
    def lost(self) -> int:
        drains = [*self.ours, *self.bare, *self.silent]
        return sum(drain.lost for drain in drains) + self.light_lost

    def percentile(self, pct: int) -> float:
        found = sorted(x for x in self.light.latencies_ms if x is not None)
        if len(found) < 2:
            return found[0] if found else float("nan")
        return statistics.quantiles(found, n=100, method="inclusive")[pct - 1]

    def check_records(self, bed: Bed, delivered: frozenset[str]) -> None:
        """After a worker stopped: count what it delivered but did not record."""
        self.delivered_by_worker += len(delivered)
        self.unrecorded += not_recorded(bed, delivered)


def best(drains: list[Drain]) -> Drain:
    return max(drains, key=lambda drain: drain.rate)


def bench_database(
    name: str, workdir: Path, tls: Tls, receiver: Receiver, options: Options
) -> Outcome:
    """Rounds of: throughput (and, in the first, light load), the bare sender on the
    same deliveries, throughput with the silent endpoint on."""
    outcome = Outcome(DATABASES[name])
    with ExitStack() as stack:
        bed = prepare_bed(stack, name, workdir / name, tls, options)
        clubs_ = seed(bed, receiver, healthy_roles(options.endpoints))
        for round_ in range(options.rounds):
            # Every other round the silent run goes first, so that neither kind of run
            # always meets the larger database.
            for silent in (False, True) if round_ % 2 == 0 else (True, False):
                label = f"{SILENT if silent else 'throughput'}-{round_}"
                since = timestamps.utc_now()
                drain = throughput(bed, receiver, clubs_, options, label)
                outcome.check_records(bed, drain.delivered)
                (outcome.silent if silent else outcome.ours).append(drain)
                if silent:
                    continue
                if round_ == 0:
                    outcome.light = light_run(bed, receiver, clubs_)
                    outcome.check_records(bed, outcome.light.delivered)
                outcome.bare.append(bare_run(bed, receiver, clubs_, since))
    return outcome


def throughput(bed: Bed, receiver: Receiver, clubs_: Clubs, options: Options, label: str) -> Drain:
    """Publish a backlog (with the silent endpoint on or off), start a worker, drain it."""
    switch_silent(bed, clubs_, on=label.startswith(SILENT))
    since = timestamps.utc_now()
    publish_backlog(bed, clubs_.busy_id, options.events, random.Random(f"{SEED}-{label}"))
    expected = expected_deliveries(bed, clubs_, since)
    receiver.reset()
    with worker(bed, label) as process:
        wait_started(process, poll=0.01)  # then it claims at once: CPU time counts from here
        return measure_drain(receiver, expected, process)


def light_run(bed: Bed, receiver: Receiver, clubs_: Clubs) -> Light:
    """The light-load run, with a worker of its own, started and idle."""
    with worker(bed, "light") as process:
        wait_started(process)
        time.sleep(IDLE_SECONDS)
        return light_load(bed, receiver, clubs_.light_id, process)


def wait_started(process: Process, poll: float = 0.1) -> None:
    """Until the worker says it is delivering."""
    deadline = time.monotonic() + START_TIMEOUT
    while "delivering webhooks" not in process.log.read_text(errors="replace"):
        process.check()
        if time.monotonic() > deadline:
            raise BenchError(f"the worker did not start within {START_TIMEOUT:.0f} s")
        time.sleep(poll)


def healthy_roles(count: int) -> list[str]:
    return [f"e{number}" for number in range(count)]


# -- report -----------------------------------------------------------------------------------


def runs(drains: list[Drain]) -> str:
    """Each run's deliveries/s, and anything lost or sent again."""
    rates = " · ".join(f"{drain.rate:,.0f}" for drain in drains)
    lost = sum(drain.lost for drain in drains)
    resent = sum(drain.resent for drain in drains)
    notes = [f"{lost:,} LOST"] if lost else []
    notes += [f"+{resent:,} sent again from earlier runs"] if resent else []
    expected = {drain.expected for drain in drains}
    each = f"{expected.pop():,} each" if len(expected) == 1 else "deliveries"
    return f"runs {rates} /s ({', '.join([each, *notes])})"


def report_setup(options: Options, settings: Settings) -> None:
    deliveries = options.events * options.endpoints
    print(
        f"throughput: {options.events:,} events × {options.endpoints} endpoints = "
        f"{deliveries:,} deliveries, published before the worker starts; deliveries/s = "
        "deliveries / (last arrival − first arrival) at the receiver; best of "
        f"{options.rounds} alternating rounds"
    )
    print(
        f"one worker process (uvloop), {settings.max_in_flight} in flight, "
        f"{settings.max_in_flight_per_endpoint} per endpoint; the bare aiohttp sender: same "
        "loop, limits, TLS trust, bodies and headers, signed per request"
    )
    print(
        "receiver: its own process, raw HTTP/1.1 over TLS on uvloop, one port per endpoint; "
        f"light load: {LIGHT_EVENTS} events, one every {LIGHT_INTERVAL * 1000:.0f} ms, one "
        "endpoint, latency = arrival − publish commit"
    )


def report(outcome: Outcome) -> None:
    """One table per database: the best run of each kind, every run, and the targets."""
    o = outcome
    p50, p99 = o.percentile(50), o.percentile(99)
    silent = f"target > −{TARGET_SILENT_DROP:.0f} %: {met(o.silent_met)}{silent_cpu(o)}"
    rows = [
        ("deliveries/s, worker", f"{best(o.ours).rate:,.0f}", runs(o.ours)),
        ("deliveries/s, bare", f"{best(o.bare).rate:,.0f}", runs(o.bare)),
        ("ratio ours/bare", f"{o.ratio:.2f}", f"target ≥ {TARGET_RATIO}: {met(o.ratio_met)}"),
        ("CPU µs per delivery", cpu_cell(o), cpu_note(o)),
        ("light load p50", f"{p50:.1f} ms", f"target < {TARGET_P50_MS:.0f} ms: {met(o.p50_met)}"),
        ("light load p99", f"{p99:.1f} ms", f"{LIGHT_EVENTS - o.light_lost} of {LIGHT_EVENTS}"),
        ("+1 silent endpoint", f"{best(o.silent).rate:,.0f}", f"healthy: {runs(o.silent)}"),
        ("change", f"{o.silent_change:+.1f} %", silent),
        ("not recorded", f"{o.unrecorded:,}", unrecorded_note(o)),
    ]
    print(f"\n{o.database}")
    for label, value, note in rows:
        print(f"  {label:<22} {value:>10}   {note}")


def cpu_cell(outcome: Outcome) -> str:
    ours, bare = least_cpu(outcome.ours), least_cpu(outcome.bare)
    if ours is None or bare is None:
        return "-"
    return f"{ours:.0f} / {bare:.0f}"


def cpu_note(outcome: Outcome) -> str:
    ours, bare = least_cpu(outcome.ours), least_cpu(outcome.bare)
    if ours is None or bare is None:
        return "unknown (no /proc)"
    return f"worker / bare sender: bare/ours {bare / ours:.2f} (CPU time, steadier than rates)"


def silent_cpu(outcome: Outcome) -> str:
    """The worker's CPU time per healthy delivery with the silent endpoint, change in %."""
    ours, silent = least_cpu(outcome.ours), least_cpu(outcome.silent)
    if ours is None or silent is None:
        return ""
    return f" (worker CPU per delivery {(silent / ours - 1) * 100:+.1f} %)"


def least_cpu(drains: list[Drain]) -> float | None:
    found = [d.cpu_per_delivery for d in drains if d.cpu_per_delivery is not None]
    return min(found) if found else None


def unrecorded_note(outcome: Outcome) -> str:
    """Deliveries that arrived, yet the database does not show as succeeded."""
    if not outcome.unrecorded:
        return f"all {outcome.delivered_by_worker:,} the worker delivered are recorded"
    return (
        f"of {outcome.delivered_by_worker:,} the worker delivered: it lost these results "
        "(they stay leased and are sent again when the lease runs out)"
    )


def met(done: bool) -> str:
    return "met" if done else "MISSED"


# -- main -------------------------------------------------------------------------------------


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--database", choices=[*DATABASES, "both"], default="both")
    parser.add_argument("--events", type=int, default=EVENTS, help=f"events per run ({EVENTS})")
    parser.add_argument("--endpoints", type=int, default=5, help="healthy endpoints (5)")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds ({ROUNDS})")
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="an existing database")
    args = parser.parse_args(argv)
    most = Settings.model_fields["max_endpoints_per_club"].default - 1  # one left for silent
    if args.events < 1 or args.rounds < 1 or not 1 <= args.endpoints <= most:
        parser.error(f"--events and --rounds must be at least 1, --endpoints between 1 and {most}")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(databases, args.events, args.endpoints, args.rounds, args.postgres_url)


def bench(options: Options) -> bool:
    """Measure each database and report; returns whether no delivery was lost."""
    outcomes = []
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-bench-")))
        tls = make_tls(workdir)
        roles = [*healthy_roles(options.endpoints), LIGHT, SILENT]
        receiver = start_receiver(stack, workdir, tls, roles)
        report_setup(options, Settings(_env_file=None))
        for name in options.databases:
            outcome = bench_database(name, workdir, tls, receiver, options)
            report(outcome)
            outcomes.append(outcome)
    print(f"ratio {min(outcome.ratio for outcome in outcomes):.2f}")
    return not any(outcome.lost for outcome in outcomes)


def main(argv: list[str] | None = None) -> int:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments[:1] == [RECEIVE]:
        return receive(arguments[1:])
    options = parse_options(arguments)
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
