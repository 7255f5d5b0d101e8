"""Does an API process's memory stay bounded over many clubs, while the busiest stay kept?

Issue 38 item 6: an API process keeps at most ``CLUBWIRE_API_KEPT_KEYS`` key rows (and
key-use times) and ``CLUBWIRE_API_KEPT_LISTINGS`` program listings, the most recently used.
This script seeds ``--clubs`` clubs (module on, one read:programs key, 3 programs each,
through the services), then plays one request sequence twice:

* **memory**, on a real ``clubwire serve`` (rate limits lifted, the kept sizes given): an
  aiohttp load generator in this process sends ``GET /clubs/<slug>/api/v1/programs`` with each
  club's key over ``--connections`` connections; after the warm-up and after each of
  ``--phases`` phases the server's resident memory (VmRSS) is read. The growth over the
  second half of the phases should be a few MB at most.
* **hit rate**, in this process (the server cannot be seen into): the same sequence against an
  ``ApiAccess`` built as ``clubwire.web.app`` builds it, counting per club the key-row reads
  that reached the database (SQLite statements) and the listings built. A request is a hit when
  it caused neither. Counted after the warm-up, for the busiest 1 % of clubs by requests and
  for all.

The sequence: a warm-up of one request per club in a random order, then ``--requests``
requests whose clubs are drawn by a Zipf-like law (rank r with weight 1/r^s, ``--zipf``),
from a seeded random generator. The last two lines are ``kept memory growth <±x.x> MB over
the second half`` and ``kept hit rate busiest <x.xx> % all <x.xx> %``, for scripts to read.

Run from the repository root: ``.venv/bin/python bench/kept.py [--clubs N] [--requests N]
[--kept-keys N] [--kept-listings N] [--database sqlite|postgresql]``. On PostgreSQL
(a fresh database, dropped at the end) a key-row read is counted when the reader did not keep
the row (``KeptRows.kept``) as the request came.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import itertools
import random
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import aiohttp
from pydantic import SecretStr

import api
import testbed
from clubwire.domain import key_format, scopes, timestamps
from clubwire.services import clubs, programs
from clubwire.services.club_api import keys
from clubwire.services.club_api.api_access import ApiAccess
from clubwire.services.club_api.rate_limits import ApiLimits, RateCounter
from clubwire.settings import Settings
from clubwire.storage import database, fastpath, migrate
from harness import HOST, BenchError, Process, exit_status, free_ports

PROG = "bench/kept.py"
SEED = 20260105
SEED_BATCH = 500  # clubs per seeding transaction
PROGRAMS = 3  # per club
TOP_SHARE = 0.01  # the busiest 1 % of clubs
LIFTED = 1_000_000  # requests per minute: the rate limits as api.child_environment lifts them


@dataclass(frozen=True)
class Options:
    clubs: int
    requests: int
    phases: int
    connections: int
    zipf: float
    kept_keys: int | None
    kept_listings: int | None
    database: str
    postgres_url: str


@dataclass(frozen=True)
class Club:
    slug: str
    club_id: str
    key: str
    prefix: str


# -- the clubs --------------------------------------------------------------------------------


def settings_for(database_url: str, home: Path, secret_key: str, options: Options) -> Settings:
    kept: dict[str, int] = {}
    if options.kept_keys is not None:
        kept["api_kept_keys"] = options.kept_keys
    if options.kept_listings is not None:
        kept["api_kept_listings"] = options.kept_listings
    return Settings(
        database_url=database_url,
        home=home,
        secret_key=SecretStr(secret_key),
        _env_file=None,
        **kept,  # type: ignore[arg-type]
    )


def seed(settings: Settings, count: int) -> list[Club]:
    """``count`` clubs, module on, each with PROGRAMS programs and one read:programs key."""
    records = api.program_records()[:PROGRAMS]
    now = api.SEASON - timedelta(days=30)
    engine = database.engine_for(settings)
    made: list[Club] = []
    try:
        migrate.upgrade(engine)
        for first in range(0, count, SEED_BATCH):
            with database.sessions(engine).begin() as session:
                for number in range(first, min(first + SEED_BATCH, count)):
                    slug = f"club-{number:05d}"
                    club = clubs.create_club(session, slug, f"Club {number}", now)
                    clubs.set_webhooks_module(session, slug, True, now)
                    programs.import_programs(session, club, records, now)
                    _, key = keys.create_key(session, club, [scopes.READ_PROGRAMS], "bench", now)
                    parsed = key_format.parse(key)
                    if parsed is None:
                        raise BenchError(f"not a key: {key[:12]}…")
                    made.append(Club(slug, club.id, key, parsed.prefix))
    finally:
        engine.dispose()
    return made


def sequence(count: int, requests: int, s: float) -> tuple[list[int], list[int]]:
    """The warm-up (every club once, shuffled) and the Zipf-drawn requests, as club indices."""
    rng = random.Random(SEED)
    warmup = list(range(count))
    rng.shuffle(warmup)
    cumulative = list(itertools.accumulate(1 / rank**s for rank in range(1, count + 1)))
    total = cumulative[-1]
    drawn = [bisect.bisect_left(cumulative, rng.random() * total) for _ in range(requests)]
    return warmup, [min(index, count - 1) for index in drawn]


def phases(drawn: list[int], count: int) -> Iterator[list[int]]:
    size = -(-len(drawn) // count)
    for first in range(0, len(drawn), size):
        yield drawn[first : first + size]


# -- memory, on the server --------------------------------------------------------------------


def rss_mb(process: Process) -> float:
    """The process's resident memory (VmRSS) in MB."""
    process.check()
    status = Path(f"/proc/{process.popen.pid}/status").read_text()
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise BenchError(f"no VmRSS in /proc/{process.popen.pid}/status")


async def load(
    port: int, clubs_: Sequence[Club], indices: list[int], connections: int
) -> Counter[int]:
    """Send one request per index over ``connections`` connections; the non-200s by status."""
    pending = iter(indices)
    failed: Counter[int] = Counter()

    async def one_connection(session: aiohttp.ClientSession) -> None:
        for index in pending:
            club = clubs_[index]
            url = f"http://{HOST}:{port}/clubs/{club.slug}/api/v1/programs"
            headers = {"Authorization": f"Bearer {club.key}"}
            async with session.get(url, headers=headers) as response:
                await response.read()
                if response.status != 200:
                    failed[response.status] += 1

    connector = aiohttp.TCPConnector(limit=connections)
    async with aiohttp.ClientSession(connector=connector) as session:
        await asyncio.gather(*(one_connection(session) for _ in range(connections)))
    return failed


def measure_memory(
    stack: ExitStack,
    workdir: Path,
    settings: Settings,
    secret_key: str,
    clubs_: list[Club],
    plan: tuple[list[int], list[int]],
    options: Options,
) -> tuple[list[tuple[int, float]], float, Counter[int]]:
    """Serve, load the warm-up and each phase; (requests so far, RSS MB) after each, the
    requests served per second after the warm-up, and the answers not 200 by status."""
    env = api.child_environment(workdir, secret_key, settings.database_url)
    env["CLUBWIRE_API_KEPT_KEYS"] = str(settings.api_kept_keys)
    env["CLUBWIRE_API_KEPT_LISTINGS"] = str(settings.api_kept_listings)
    (port,) = free_ports(1)
    server = api.start_ours(stack, env, workdir, port)
    first = clubs_[0]
    url = f"http://{HOST}:{port}/clubs/{first.slug}/api/v1/programs"
    api.wait_ready(server, url, first.key)
    warmup, drawn = plan
    samples = [(0, rss_mb(server))]
    print(f"{'phase':<8} {'requests':>10} {'RSS MB':>8} {'req/s':>7}")
    print(f"{'start':<8} {0:>10,} {samples[0][1]:>8.1f}")
    done, zipf_seconds, failures = 0, 0.0, Counter[int]()
    for number, indices in enumerate([warmup, *phases(drawn, options.phases)]):
        started = time.monotonic()
        failed = asyncio.run(load(port, clubs_, indices, options.connections))
        seconds = time.monotonic() - started
        rate = len(indices) / seconds
        zipf_seconds += seconds if number else 0.0
        failures += failed
        done += len(indices)
        samples.append((done, rss_mb(server)))
        label = "warm-up" if number == 0 else str(number)
        print(f"{label:<8} {done:>10,} {samples[-1][1]:>8.1f} {rate:>7,.0f}")
    if failures:
        lines = server.log.read_text(errors="replace").splitlines()
        odd = [line for line in lines if '"status":200,' not in line][-10:]
        print("the server's log, its last lines but 200s:", *odd, sep="\n")
    return samples, len(drawn) / zipf_seconds, failures


# -- hit rate, in this process ----------------------------------------------------------------


@dataclass
class Misses:
    requests: Counter[str]
    key_reads: Counter[str]
    listings: Counter[str]
    missed: Counter[str]  # requests with a key read or a listing built


async def count_misses(
    settings: Settings, clubs_: list[Club], plan: tuple[list[int], list[int]], share_every: int
) -> Misses:
    """Play the sequence against an ApiAccess built as the app builds it; count per club id,
    after the warm-up, the key rows read from the database and the listings built.

    Each request is counted against the (lifted) rate limits, as served, and the counts are
    shared (written to the database) every ``share_every`` requests: the server shares every
    second, so that is the requests it served per second. On SQLite that commit makes the
    reader forget every key row it keeps."""
    engine = database.engine_for(settings)
    sessions = database.sessions(engine)
    kept = settings.api_kept_keys
    reader = await fastpath.open_reader(settings.sqlalchemy_url, sessions, kept)
    access = ApiAccess(reader, sessions, timestamps.utc_now, settings.api_kept_listings, kept)
    key_reads: list[str] = []  # SQLite: the key-row statements run on the reader's connection
    if isinstance(reader, fastpath.SqliteReader):
        reader._connection.set_trace_callback(
            lambda sql: key_reads.append(sql) if "api_keys" in sql else None
        )
    kept_rows = reader if isinstance(reader, fastpath.KeptRows) else None  # PostgreSQL
    built: list[str] = []
    load_listing: Callable[[str], bytes] = access._load_listing

    def counted_listing(club_id: str) -> bytes:
        built.append(club_id)
        return load_listing(club_id)

    setattr(access, "_load_listing", counted_listing)  # noqa: B010 (a method, counted)
    counter = RateCounter(sessions)
    limits = ApiLimits(counter, per_key=LIFTED, per_club=LIFTED, auth_failures=0)
    misses = Misses(Counter(), Counter(), Counter(), Counter())
    served = 0
    warmup, drawn = plan
    try:
        for measured, indices in ((False, warmup), (True, drawn)):
            for index in indices:
                club = clubs_[index]
                read_before, built_before = len(key_reads), len(built)
                was_kept = kept_rows is not None and kept_rows.kept((club.slug, club.prefix))
                caller = await access.authorize(
                    club.slug, f"Bearer {club.key}", scopes.READ_PROGRAMS
                )
                read = len(key_reads) > read_before if kept_rows is None else not was_kept
                limits.take(caller.prefix, caller.club_id)
                await access.programs_body(caller)
                served += 1
                if served % share_every == 0:
                    await counter.share()
                await asyncio.sleep(0)  # a turn of the event loop per request, as served
                if measured:
                    listed = len(built) > built_before
                    misses.requests[club.club_id] += 1
                    misses.key_reads[club.club_id] += read
                    misses.listings[club.club_id] += listed
                    misses.missed[club.club_id] += read or listed
    finally:
        await access.close()
        engine.dispose()
    return misses


def hit_rate(misses: Misses, club_ids: Sequence[str]) -> float:
    requests = sum(misses.requests[club_id] for club_id in club_ids)
    missed = sum(misses.missed[club_id] for club_id in club_ids)
    return 100 * (1 - missed / requests) if requests else 0.0


# -- main -------------------------------------------------------------------------------------


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--clubs", type=int, default=10_000, help="clubs seeded (10,000)")
    parser.add_argument(
        "--requests", type=int, default=200_000, help="requests after the warm-up (200,000)"
    )
    parser.add_argument("--phases", type=int, default=10, help="RSS samples after warm-up (10)")
    parser.add_argument("--connections", type=int, default=32, help="client connections (32)")
    parser.add_argument("--zipf", type=float, default=1.1, help="Zipf exponent s (1.1)")
    parser.add_argument("--kept-keys", type=int, help="CLUBWIRE_API_KEPT_KEYS (its default)")
    parser.add_argument(
        "--kept-listings", type=int, help="CLUBWIRE_API_KEPT_LISTINGS (its default)"
    )
    parser.add_argument(
        "--database", choices=list(api.DATABASES), default="sqlite", help="served from (sqlite)"
    )
    parser.add_argument("--postgres-url", default=api.POSTGRES_URL, help="a PostgreSQL server")
    args = parser.parse_args(argv)
    if min(args.clubs, args.connections) < 1 or not 2 <= args.phases <= args.requests:
        parser.error("--clubs and --connections at least 1, --phases 2 to --requests")
    return Options(
        args.clubs,
        args.requests,
        args.phases,
        args.connections,
        args.zipf,
        args.kept_keys,
        args.kept_listings,
        args.database,
        args.postgres_url,
    )


def bench(options: Options) -> bool:
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-")))
        url = testbed.database_url(stack, options.database, workdir, options.postgres_url)
        secret_key = secrets.token_urlsafe(30)  # 40 characters
        settings = settings_for(url, workdir, secret_key, options)
        started = time.monotonic()
        clubs_ = seed(settings, options.clubs)
        seconds = time.monotonic() - started
        print(
            f"seeded {options.clubs:,} clubs ({api.DATABASES[options.database]}; {PROGRAMS} "
            "programs and one key each) "
            f"in {seconds:.1f} s ({1000 * seconds / options.clubs:.2f} ms per club)"
        )
        print(
            f"kept keys {settings.api_kept_keys:,}, kept listings "
            f"{settings.api_kept_listings:,}; warm-up {options.clubs:,} requests (each club "
            f"once), then {options.requests:,} Zipf (s={options.zipf}) requests"
        )
        plan = sequence(options.clubs, options.requests, options.zipf)
        touched = len(set(plan[1]))
        print(f"clubs requested after the warm-up: {touched:,} of {options.clubs:,}")
        samples, rate, failures = measure_memory(
            stack, workdir, settings, secret_key, clubs_, plan, options
        )
        share_every = max(1, round(rate))
        misses = asyncio.run(count_misses(settings, clubs_, plan, share_every))
    half = samples[1 + options.phases // 2][1]
    growth = samples[-1][1] - half
    ranked = [club_id for club_id, _ in misses.requests.most_common()]
    busiest = ranked[: max(1, round(TOP_SHARE * len(clubs_)))]
    print("memory: the server's VmRSS; hit rate: the same sequence in this process, after the")
    print("warm-up (a hit reads no key row from the database and builds no listing), the rate")
    print(f"counts shared every {share_every:,} requests (what the server served per second)")
    for name, counted in (("key rows read", misses.key_reads), ("listings built", misses.listings)):
        print(f"{name}: busiest {sum(counted[c] for c in busiest):,}, all {counted.total():,}")
    rates = hit_rate(misses, busiest), hit_rate(misses, ranked)
    if failures:
        print(f"warning: answers not 200, by status: {dict(failures)}")
    print(f"kept memory growth {growth:+.1f} MB over the second half")
    print(f"kept hit rate busiest {rates[0]:.2f} % all {rates[1]:.2f} %")
    return not failures


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
