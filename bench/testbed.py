"""The delivery benchmark's test bed: TLS, a database, the worker process, clubs and events.

Two clubs with their webhooks module on: the busy one, with the healthy endpoints (receiver
roles e0, e1, …) and two neighbours of theirs (``NEIGHBOURS``), the silent endpoint and the
throttling one (429 to every other request), each switched on only for its own runs (the silent
one is on from the start, as the burst benchmark has it); the light one, with one endpoint, for
latency at light load. Every endpoint is subscribed to every kind; events
carry sample data drawn from random generators seeded from ``SEED``.

For the runs at scale, ``dead_endpoint`` adds a third club whose one endpoint points at a port
nobody listens on, and ``bulk_deliveries`` gives endpoints many deliveries in one SQL statement
(``generate_series`` on PostgreSQL, a recursive CTE on SQLite), all pointing at one event: a
million rows load in seconds, where publishing them would take many minutes.
"""

from __future__ import annotations

import os
import random
import secrets
import sys
import time
from collections.abc import Collection, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import NamedTuple, cast

import psycopg
import trustme
from psycopg import sql
from pydantic import SecretStr
from sqlalchemy import bindparam, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog, off_reasons, timestamps
from clubwire.domain.delivering import Status, Trigger
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import claims, events
from clubwire.settings import Settings
from clubwire.storage import database, migrate
from clubwire.storage.models import Club, Endpoint
from clubwire.storage.types import UTCDateTime
from harness import HOST, START_TIMEOUT, STOP_TIMEOUT, BenchError, Process, free_ports, start
from receiver import LIGHT, SILENT, THROTTLING, Receiver

BUSY_CLUB, LIGHT_CLUB, DEAD_CLUB = "granite", "pebble", "basalt"
KINDS = event_catalog.SUBSCRIBABLE
PUBLISH_BATCH = 500  # events per publishing transaction
ATTEMPT_TIMEOUT = 2.0  # CLUBWIRE_ATTEMPT_TIMEOUT: silent attempts time out within a run
SEED = 20260105
HOLDER = "bench"  # the lease token the bench holds lanes under while workers start
HOLD = timedelta(minutes=10)
NEIGHBOURS = (SILENT, THROTTLING)  # the busy club's endpoints besides the healthy ones
GAME_UPDATED = "game.updated"  # the kind of the ordered runs' events (``publish_keyed``)


# -- TLS and databases ------------------------------------------------------------------------


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


def database_url(stack: ExitStack, name: str, workdir: Path, postgres_url: str) -> str:
    """The URL of a database for a run: a SQLite file in ``workdir`` (``name`` sqlite), or a
    fresh PostgreSQL database, dropped when the stack closes."""
    if name == "sqlite":
        return f"sqlite:///{workdir / 'bench.db'}"
    return postgres_database(stack, postgres_url)


def prepare_bed(stack: ExitStack, name: str, workdir: Path, tls: Tls, postgres_url: str) -> Bed:
    """A migrated database (a SQLite file in ``workdir``, or a fresh PostgreSQL database)."""
    workdir.mkdir()
    url = database_url(stack, name, workdir, postgres_url)
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


# -- the worker process -----------------------------------------------------------------------


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
        yield start_clubwire(stack, bed, ["worker"], label)


def start_clubwire(stack: ExitStack, bed: Bed, arguments: list[str], label: str) -> Process:
    """``clubwire <arguments>`` on the bed, logging to ``<command>-<label>.log``; the stack
    stops it (gracefully: it may finish the attempts in flight)."""
    command = [sys.executable, "-m", "clubwire", *arguments]
    log = bed.workdir / f"{arguments[0]}-{label}.log"
    return start(stack, command, bed.env, log, bed.settings.attempt_timeout + 2 * STOP_TIMEOUT)


def wait_started(process: Process, poll: float = 0.1) -> None:
    """Until the worker says it is delivering."""
    deadline = time.monotonic() + START_TIMEOUT
    while "delivering webhooks" not in process.log.read_text(errors="replace"):
        process.check()
        if time.monotonic() > deadline:
            raise BenchError(f"the worker did not start within {START_TIMEOUT:.0f} s")
        time.sleep(poll)


# -- clubs, endpoints, events -----------------------------------------------------------------


@dataclass(frozen=True)
class Clubs:
    busy_id: str  # the healthy endpoints e0, e1, … and the neighbours
    light_id: str  # one endpoint, for latency at light load
    neighbours: dict[str, str]  # role in NEIGHBOURS → endpoint id (each on for its own runs)
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
        neighbours = {
            role: new_endpoint(session, bed, busy, receiver.url(role))[0].id for role in NEIGHBOURS
        }
        clubs_ = Clubs(busy.id, light.id, neighbours, signing_secrets, roles)
    switch_neighbour(bed, clubs_, SILENT)
    return clubs_


def new_endpoint(session: Session, bed: Bed, club: Club, url: str) -> tuple[Endpoint, str]:
    return endpoints.create_endpoint(session, club, url, KINDS, timestamps.utc_now(), bed.settings)


def new_club(session: Session, slug: str) -> Club:
    now = timestamps.utc_now()
    club = clubs.create_club(session, slug, f"{slug.title()} Curling Club", now)
    clubs.set_webhooks_module(session, slug, True, now)
    return club


def switch_neighbour(bed: Bed, clubs_: Clubs, on: str | None) -> None:
    """Switch the neighbour of role ``on`` on and the others off (their waiting deliveries
    are then skipped); None: all off."""
    now = timestamps.utc_now()
    with bed.sessions.begin() as session:
        for role, endpoint_id in clubs_.neighbours.items():
            if role == on:
                endpoints.enable_endpoint(session, clubs_.busy_id, endpoint_id, now)
            else:
                endpoints.disable_endpoint(
                    session, clubs_.busy_id, endpoint_id, now, off_reasons.OffReason.STAFF
                )


def publish_backlog(bed: Bed, club_id: str, count: int, rng: random.Random) -> None:
    """``count`` events of every kind in turn, PUBLISH_BATCH to a transaction."""
    for first in range(0, count, PUBLISH_BATCH):
        with bed.sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            for number in range(first, min(count, first + PUBLISH_BATCH)):
                publish_one(session, club, KINDS[number % len(KINDS)], rng)


def publish_keyed(bed: Bed, club_id: str, count: int, keys: int, rng: random.Random) -> None:
    """``count`` ``game.updated`` events over ``keys`` games (ordering keys ``game:<id>``),
    PUBLISH_BATCH to a transaction: passes over all the games, each in an order of its own
    (``keyed_games``)."""
    games = keyed_games(count, keys, rng)
    for first in range(0, count, PUBLISH_BATCH):
        with bed.sessions.begin() as session:
            club = clubs.get_club_by_id(session, club_id)
            for game in games[first : first + PUBLISH_BATCH]:
                now = timestamps.utc_now()
                data = event_catalog.sample(GAME_UPDATED, now, rng)
                data["game"] = {**cast("dict[str, object]", data["game"]), "id": game}
                events.publish(session, club, GAME_UPDATED, data, now)


def keyed_games(count: int, keys: int, rng: random.Random) -> list[str]:
    """``count`` game ids in passes over ``keys`` games, each pass shuffled: every game has
    its share of the events (no line longer than another by more than one), and a game may
    come twice in a row where one pass ends and the next begins, as a real game's result and
    its correction would."""
    games: list[str] = []
    while len(games) < count:
        one_pass = [f"gm_bench_{number:04d}" for number in range(keys)]
        rng.shuffle(one_pass)
        games += one_pass
    return games[:count]


def set_ordered(bed: Bed, clubs_: Clubs, ordered: bool) -> None:
    """Make the healthy endpoints ordered or not (between runs: nothing of theirs waits)."""
    now = timestamps.utc_now()
    with bed.sessions.begin() as session:
        for endpoint_id in clubs_.roles:
            endpoints.update_endpoint(
                session, clubs_.busy_id, endpoint_id, now, bed.settings, ordered=ordered
            )


def publish_one(session: Session, club: Club, kind: str, rng: random.Random) -> str:
    now = timestamps.utc_now()
    event, _ = events.publish(session, club, kind, event_catalog.sample(kind, now, rng), now)
    return event.id


def hold_lanes(bed: Bed, endpoint_ids: Collection[str]) -> list[str]:
    """Lease the lanes of these endpoints that have deliveries due, under the bench's own
    token, as a worker would: workers started meanwhile find nothing to take and idle, so
    that none starts up while another already drains. Returns the lanes held."""
    now = timestamps.utc_now()
    with bed.sessions.begin() as session:
        held = claims.take_lanes(session, now, now + HOLD, HOLDER, len(endpoint_ids), endpoint_ids)
    return [lane.endpoint_id for lane in held]


def release_lanes(bed: Bed, endpoint_ids: list[str]) -> None:
    """Give the held lanes back: the workers are told (``NOTIFY``; on SQLite, the commit)
    and take them as they take any lane that comes due."""
    with bed.sessions.begin() as session:
        claims.give_back(session, endpoint_ids, HOLDER, timestamps.utc_now())


# -- deliveries in bulk, for the runs at scale ------------------------------------------------


class Target(NamedTuple):
    """An endpoint that bulk deliveries go to, and its club."""

    club_id: str
    endpoint_id: str


def dead_endpoint(bed: Bed) -> Target:
    """A club of its own with one endpoint at a port nobody listens on (connections refused)."""
    with bed.sessions.begin() as session:
        club = new_club(session, DEAD_CLUB)
        (port,) = free_ports(1)
        endpoint, _ = new_endpoint(session, bed, club, f"https://{HOST}:{port}/dead")
        return Target(club.id, endpoint.id)


# The rows' numbers: 1 … :count (the recursive CTE is SQLite's generate_series).
_SERIES = {
    "postgresql": "s(n) AS (SELECT generate_series(1, :count))",
    "sqlite": "s(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM s WHERE n < :count)",
}
# Row n is due n ms before :due, as retries come due at different times: with one time for
# all, PostgreSQL's index would hold them as one deduplicated entry and be far smaller than
# in real life. SQLite keeps the text SQLAlchemy writes (microseconds, six digits).
_DUE_AT = {
    "postgresql": "CAST(:due AS TIMESTAMPTZ) - s.n * INTERVAL '1 millisecond'",
    "sqlite": "strftime('%Y-%m-%d %H:%M:%f', :due, '-' || (s.n / 1000.0) || ' seconds') || '000'",
}
_BULK = """
WITH RECURSIVE t(k, club_id, endpoint_id) AS (VALUES {targets}), {series}
INSERT INTO deliveries (id, club_id, event_id, endpoint_id, status, attempt, next_attempt_at,
                        next_trigger, created_at, updated_at)
SELECT CAST(:prefix AS TEXT) || s.n, t.club_id, :event_id, t.endpoint_id, :status, :attempt,
       {due_at}, :trigger, :now, :now
FROM s JOIN t ON t.k = s.n % :spread
"""


def bulk_deliveries(
    bed: Bed, targets: list[Target], count: int, due_in: timedelta, label: str, attempt: int = 1
) -> None:
    """``count`` pending deliveries (attempt ``attempt``) due ``due_in`` from now (row n
    n ms sooner), dealt in turn to ``targets``, all of one event; one statement. On
    PostgreSQL the table is then vacuumed and analysed, as autovacuum would soon do, so that
    every run meets the same statistics."""
    now = timestamps.utc_now()
    with bed.sessions.begin() as session:
        club, ping = clubs.get_club_by_id(session, targets[0].club_id), event_catalog.PING
        event_id = events.record_event(
            session, club, ping, event_catalog.validate(ping, event_catalog.sample(ping, now)), now
        ).id
        values = ", ".join(f"({k}, :club_{k}, :endpoint_{k})" for k in range(len(targets)))
        statement = text(
            _BULK.format(targets=values, series=_SERIES[bed.name], due_at=_DUE_AT[bed.name])
        ).bindparams(bindparam("due", type_=UTCDateTime()), bindparam("now", type_=UTCDateTime()))
        parameters: dict[str, object] = {
            f"{key}_{k}": value
            for k, target in enumerate(targets)
            for key, value in zip(("club", "endpoint"), target, strict=True)
        }
        parameters |= {
            "count": count,
            "spread": len(targets),
            "prefix": f"dlv_{label}_",
            "event_id": event_id,
            "status": Status.PENDING.value,
            "attempt": attempt,
            "trigger": Trigger.SCHEDULED.value,
            "due": now + due_in,
            "now": now,
        }
        session.execute(statement, parameters)
        session.execute(_HEADS, {"endpoints": [target.endpoint_id for target in targets]})
    analyse(bed)


# The queue heads of endpoints given deliveries behind the services' back, as publishing would
# keep them: each due when its earliest unfinished delivery is.
_HEADS = text(
    """
    INSERT INTO queue_heads (endpoint_id, next_due_at)
    SELECT endpoint_id, min(next_attempt_at) FROM deliveries
    WHERE endpoint_id IN :endpoints AND next_attempt_at IS NOT NULL
    GROUP BY endpoint_id
    ON CONFLICT (endpoint_id) DO UPDATE SET next_due_at = excluded.next_due_at
    """
).bindparams(bindparam("endpoints", expanding=True))


def analyse(bed: Bed, tables: str = "deliveries, queue_entries, queue_heads") -> None:
    """VACUUM ANALYZE the ``tables`` loaded (by default the deliveries and the queue's order)
    on PostgreSQL (outside a transaction), then CHECKPOINT, so that the runs after a bulk
    load pay neither for its WAL and dirty pages (a checkpoint falling inside a run writes
    them then) nor for autovacuum working through a million new rows beside them; nothing
    on SQLite, where clubwire runs no ANALYZE either."""
    if bed.name != "postgresql":
        return
    engine = bed.sessions.kw["bind"]
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text(f"VACUUM ANALYZE {tables}"))
        connection.execute(text("CHECKPOINT"))


def delete_deliveries(bed: Bed, label: str) -> None:
    """Delete the bulk deliveries made with ``label``."""
    with bed.sessions.begin() as session:
        session.execute(
            text("DELETE FROM deliveries WHERE id LIKE :prefix"), {"prefix": f"dlv_{label}_%"}
        )
