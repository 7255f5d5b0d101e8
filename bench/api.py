"""How fast is the club data API, measured against the fastest it could be on the same stack?

``GET {base_url}/api/v1/programs`` is the hot path of clubwire: every request reads the
API key's row (one indexed SQLite query), checks the key's hash, revocation, the club's
module switch and the scope, and answers with the club's program list, cached per
process as bytes. This script serves a club of 50 public programs with the real server
(``clubwire serve``: one uvicorn process, uvloop and httptools) and, side by side, a
bare FastAPI app under the same uvicorn settings whose one route answers the very same
bytes straight from memory. ``wrk`` drives both with the same load, in alternation.

The bare app is the ceiling: the cost of HTTP parsing, routing and response writing in
this stack, on this machine. The ratio ours/bare is therefore what our own work costs
(authentication, the database read, the cache check), independent of how fast the
machine is; 0.5 means that work takes as long as everything else together. The last
line of the output is ``ratio <ours/bare>`` with two decimals, for scripts to read.

``--database postgresql`` (or ``both``) runs ours on a fresh PostgreSQL database
(``--postgres-url``, default ``CLUBWIRE_TEST_POSTGRES_URL`` or the local server), the
production database. When ours answers with an ``ETag``, a third kind of run sends it back
(``If-None-Match``): the conditional request a polling club site makes, answered ``304``.

Run from the repository root: ``.venv/bin/python bench/api.py [--database
sqlite|postgresql|both] [--seconds N] [--connections N]``.
Needs ``wrk`` (``apt-get install wrk``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import NamedTuple

from pydantic import SecretStr

import testbed
from clubwire.domain import program_wire, scopes
from clubwire.services import clubs, programs
from clubwire.services.club_api import keys
from clubwire.settings import Settings
from clubwire.storage import database, migrate
from harness import (
    HOST,
    START_TIMEOUT,
    STOP_TIMEOUT,
    BenchError,
    Process,
    exit_status,
    free_ports,
    start,
)

PROG = "bench/api.py"
SLUG = "granite"
CLUB_NAME = "Granite Curling Club"
ROUTE = f"/clubs/{SLUG}/api/v1/programs"
THREADS = 1
ROUNDS = 2
WARMUP_SECONDS = 2
DATABASES = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
POSTGRES_URL = os.environ.get(
    "CLUBWIRE_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SEASON = datetime(2026, 10, 5, tzinfo=UTC)  # fixed dates: the same bytes on every run


class Template(NamedTuple):
    """A kind of program, offered once per session."""

    id: str
    name: str
    type: program_wire.ProgramType
    description: str
    day: int  # days after the session starts
    hour: float
    length: int  # days
    price: int
    capacity: int


T = program_wire.ProgramType
_TEMPLATES = [
    Template(
        "tue-league",
        "Tuesday Night League",
        T.LEAGUE,
        "Social league, two draws a night, teams of four. Skip or spare.",
        1,
        18.5,
        49,
        165,
        48,
    ),
    Template(
        "wed-daytime",
        "Wednesday Daytime League",
        T.LEAGUE,
        "Relaxed daytime curling followed by coffee in the lounge.",
        2,
        10,
        49,
        140,
        32,
    ),
    Template(
        "thu-competitive",
        "Thursday Competitive League",
        T.LEAGUE,
        "Eight-end games, a skills ranking and a playoff round at the end.",
        3,
        19,
        49,
        185,
        32,
    ),
    Template(
        "fri-doubles",
        "Friday Mixed Doubles",
        T.LEAGUE,
        "Mixed doubles with power play; bring a partner or we will find one.",
        4,
        19.5,
        42,
        95,
        24,
    ),
    Template(
        "sun-juniors",
        "Sunday Juniors",
        T.CAMP,
        "Ages 10 to 18: sliding technique, strategy, and fun; rocks scaled for the youngest.",
        6,
        9,
        42,
        60,
        40,
    ),
    Template(
        "learn-to-curl",
        "Learn to Curl",
        T.LEARN_TO_CURL,
        "Four evenings that take you from your first slide to your first game.",
        0,
        18,
        21,
        95,
        24,
    ),
    Template(
        "sweeping",
        "Sweeping Clinic with Coach Ana",
        T.CLINIC,
        "Technique and fitness for sweepers; brooms provided.",
        5,
        13,
        0,
        45,
        16,
    ),
    Template(
        "delivery",
        "Delivery Clinic",
        T.CLINIC,
        "Video analysis of your delivery with a certified coach.",
        12,
        13,
        0,
        45,
        16,
    ),
    Template(
        "bonspiel",
        "Bonspiel",
        T.BONSPIEL,
        "Sixteen teams, a four-game guarantee and a banquet on Saturday night.",
        18,
        8,
        2,
        240,
        64,
    ),
    Template(
        "drop-in",
        "Friday Drop-In",
        T.DROP_IN,
        "Come alone or with friends; we make up teams at the door.",
        4,
        17,
        35,
        15,
        32,
    ),
]
# (name, days after SEASON): five sessions of ten programs each
_SESSIONS = [("October", 0), ("November", 35), ("January", 98), ("February", 133), ("March", 161)]

_LATENCY = re.compile(r"^\s*(50|99)%\s+([\d.]+)(us|ms|s|m)\s*$", re.MULTILINE)
_TO_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0}


@dataclass(frozen=True)
class Run:
    """What one wrk run measured."""

    requests_per_second: float
    p50_ms: float
    p99_ms: float
    non_2xx: int
    socket_errors: int
    requests: int = 0  # completed in the run


@dataclass(frozen=True)
class Options:
    seconds: int
    connections: int
    databases: list[str]
    postgres_url: str


class Target(NamedTuple):
    """A server to load: its URL, and the headers each request carries besides the key."""

    url: str
    headers: tuple[str, ...] = ()


# -- the club ---------------------------------------------------------------------------------


def program_records() -> list[program_wire.ProgramRecord]:
    """50 active, public programs: ten kinds over five sessions of the season."""
    return [
        _record(template, session, offset)
        for session, offset in _SESSIONS
        for template in _TEMPLATES
    ]


def _record(template: Template, session: str, session_day: int) -> program_wire.ProgramRecord:
    start = SEASON + timedelta(days=session_day + template.day, hours=template.hour)
    return program_wire.ProgramRecord.model_validate(
        {
            "id": f"{template.id}-{session.lower()}",
            "name": f"{template.name}: {session}",
            "description": template.description,
            "type": template.type,
            "status": program_wire.ProgramStatus.ACTIVE,
            "private": False,
            "startDate": start,
            "endDate": start + timedelta(days=template.length, hours=3),
            "price": f"{template.price}.00",
            "capacity": template.capacity,
        }
    )


def seed(database_url: str, home: Path, secret_key: str) -> str:
    """Create the club (module on), its programs and one read:programs key; returns the key."""
    settings = Settings(
        database_url=database_url, home=home, secret_key=SecretStr(secret_key), _env_file=None
    )
    engine = database.engine_for(settings)
    now = SEASON - timedelta(days=30)
    try:
        migrate.upgrade(engine)
        with database.sessions(engine).begin() as session:
            club = clubs.create_club(session, SLUG, CLUB_NAME, now)
            clubs.set_webhooks_module(session, SLUG, True, now)
            programs.import_programs(session, club, program_records(), now)
            _, key = keys.create_key(session, club, [scopes.READ_PROGRAMS], "bench", now)
    finally:
        engine.dispose()
    return key


# -- the servers ------------------------------------------------------------------------------

BARE_APP = '''\
"""The ceiling: one FastAPI route answering fixed bytes, served like clubwire is."""

import sys
from pathlib import Path

import uvicorn
from fastapi import FastAPI
from fastapi.responses import Response

BODY = Path(sys.argv[1]).read_bytes()
app = FastAPI()


@app.get(sys.argv[3])
async def programs() -> Response:
    return Response(content=BODY, media_type="application/json")


uvicorn.run(
    app, host="127.0.0.1", port=int(sys.argv[2]), loop="uvloop", http="httptools",
    access_log=False, log_level="warning", server_header=False,
)
'''


def child_environment(workdir: Path, secret_key: str, database_url: str) -> dict[str, str]:
    """The parent's environment without its CLUBWIRE_* settings, plus the benchmark's."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CLUBWIRE_")}
    env.update(
        {
            "CLUBWIRE_DATABASE_URL": database_url,
            # The limiters count every request, as in production, but never refuse one here
            # (the key's and, since issue 31, the club's).
            "CLUBWIRE_API_RATE_LIMIT": "1000000",
            "CLUBWIRE_API_CLUB_RATE_LIMIT": "1000000",
            "CLUBWIRE_HOME": str(workdir),
            "CLUBWIRE_SECRET_KEY": secret_key,
        }
    )
    return env


def start_ours(
    stack: ExitStack,
    env: dict[str, str],
    workdir: Path,
    port: int,
    log: str = "clubwire.log",
    stop_timeout: float = STOP_TIMEOUT,
) -> Process:
    command = [sys.executable, "-m", "clubwire", "serve", "--host", HOST, "--port", str(port)]
    return start(stack, command, env, workdir / log, stop_timeout)


def start_bare(
    stack: ExitStack, env: dict[str, str], workdir: Path, body: bytes, port: int
) -> Process:
    body_file, app_file = workdir / "body.json", workdir / "bare_app.py"
    body_file.write_bytes(body)
    app_file.write_text(BARE_APP)
    command = [sys.executable, str(app_file), str(body_file), str(port), ROUTE]
    return start(stack, command, env, workdir / "bare.log")


# -- HTTP checks ------------------------------------------------------------------------------


def url_of(port: int) -> str:
    return f"http://{HOST}:{port}{ROUTE}"


class Answer(NamedTuple):
    status: int  # 0 while nothing listens
    body: bytes
    etag: str | None


def fetch(url: str, key: str, headers: tuple[str, ...] = ()) -> Answer:
    """GET ``url`` with the key and ``headers`` (``Name: value``)."""
    if not url.startswith(f"http://{HOST}:"):
        raise BenchError(f"not a local URL: {url}")
    sent = dict(header.split(": ", 1) for header in headers)
    sent["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, headers=sent)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=2) as response:  # noqa: S310
            return Answer(int(response.status), bytes(response.read()), response.headers["ETag"])
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.read(), exc.headers["ETag"])
    except OSError:
        return Answer(0, b"", None)


def wait_ready(server: Process, url: str, key: str) -> Answer:
    """Poll until the server answers 200; returns that answer."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.popen.poll() is not None:
            raise BenchError(f"{server.log.name}: the server exited:\n{server.tail()}")
        status, body, _ = answer = fetch(url, key)
        if status == 200:
            return answer
        if status:
            raise BenchError(f"GET {url} answered {status}: {body[:300]!r}")
        time.sleep(0.1)
    raise BenchError(f"GET {url} did not answer within {START_TIMEOUT:.0f} s:\n{server.tail()}")


def program_count(body: bytes) -> int:
    return len(json.loads(body)["data"])


# -- wrk --------------------------------------------------------------------------------------


def wrk_version() -> str:
    """``4.1.0`` from ``wrk -v`` (which exits non-zero after printing it)."""
    output = subprocess.run(["wrk", "-v"], capture_output=True, text=True, check=False).stdout
    match = re.search(r"wrk (?:\S+/)?(\d+(?:\.\d+)+)", output)
    return match[1] if match else "(unknown version)"


def run_wrk(target: Target, key: str, seconds: int, connections: int) -> Run:
    headers = [f"Authorization: Bearer {key}", *target.headers]
    command = ["wrk", f"-t{THREADS}", f"-c{connections}", f"-d{seconds}s", "--latency"]
    command += [part for header in headers for part in ("-H", header)] + [target.url]
    done = subprocess.run(
        command, capture_output=True, text=True, check=False, timeout=seconds + 60
    )
    if done.returncode != 0:
        message = done.stderr.strip() or done.stdout.strip()
        raise BenchError(f"wrk failed (exit status {done.returncode}): {message}")
    return parse_wrk(done.stdout)


def parse_wrk(output: str) -> Run:
    """Requests/s, p50 and p99 in ms, non-2xx responses, socket errors and requests of wrk's
    report."""
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.MULTILINE)
    requests = re.search(r"^\s*(\d+) requests in ", output, re.MULTILINE)
    latencies = {pct: float(value) * _TO_MS[unit] for pct, value, unit in _LATENCY.findall(output)}
    if rate is None or set(latencies) != {"50", "99"}:
        raise BenchError(f"cannot read wrk's output:\n{output}")
    non_2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    sockets = re.search(r"Socket errors:(.*)$", output, re.MULTILINE)
    return Run(
        requests_per_second=float(rate[1]),
        p50_ms=latencies["50"],
        p99_ms=latencies["99"],
        non_2xx=int(non_2xx[1]) if non_2xx else 0,
        socket_errors=sum(int(n) for n in re.findall(r"\d+", sockets[1])) if sockets else 0,
        requests=int(requests[1]) if requests else 0,
    )


def measure(targets: dict[str, Target], key: str, options: Options) -> dict[str, list[Run]]:
    """A discarded warm-up against each, then ROUNDS rounds in alternation."""
    for target in targets.values():
        run_wrk(target, key, WARMUP_SECONDS, options.connections)
    runs: dict[str, list[Run]] = {name: [] for name in targets}
    for _ in range(ROUNDS):
        for name, target in targets.items():
            runs[name].append(run_wrk(target, key, options.seconds, options.connections))
    return runs


def best(runs: list[Run]) -> Run:
    return max(runs, key=lambda run: run.requests_per_second)


# -- report -----------------------------------------------------------------------------------


def milliseconds(value: float) -> str:
    return f"{value:.2f} ms" if value < 1 else f"{value:.1f} ms"


def report(labels: dict[str, str], results: dict[str, Run], options: Options) -> None:
    print(
        f"load generator: wrk {wrk_version()} ({THREADS} thread, {options.connections} "
        f"connections, {options.seconds} s per run), best of {ROUNDS} runs"
    )
    width = max(len(label) for label in labels.values())
    for name, run in results.items():
        print(
            f"{name:<9} {labels[name]:<{width}} {run.requests_per_second:,.0f} req/s  "
            f"p50 {milliseconds(run.p50_ms)}  p99 {milliseconds(run.p99_ms)}"
        )


def problems(runs: dict[str, list[Run]]) -> Iterator[str]:
    """Warnings about runs whose numbers cannot be trusted."""
    for name, measured in runs.items():
        non_2xx = sum(run.non_2xx for run in measured)
        errors = sum(run.socket_errors for run in measured)
        if non_2xx:
            yield f"warning: {name} answered {non_2xx:,} non-2xx responses; the ratio means nothing"
        if errors:
            yield f"warning: {name} had {errors:,} socket errors (connect/read/write/timeout)"


# -- main -------------------------------------------------------------------------------------


def parse_options(argv: list[str] | None) -> Options:
    summary = (__doc__ or "").splitlines()[0]
    parser = argparse.ArgumentParser(prog=PROG, description=summary)
    parser.add_argument("--seconds", type=int, default=10, help="length of each measured run (10)")
    parser.add_argument("--connections", type=int, default=64, help="wrk connections (64)")
    parser.add_argument(
        "--database", choices=[*DATABASES, "both"], default="sqlite", help="ours on (sqlite)"
    )
    parser.add_argument("--postgres-url", default=POSTGRES_URL, help="a PostgreSQL server")
    args = parser.parse_args(argv)
    if args.seconds < 1 or args.connections < 1:
        parser.error("--seconds and --connections must be at least 1")
    databases = list(DATABASES) if args.database == "both" else [args.database]
    return Options(args.seconds, args.connections, databases, args.postgres_url)


def bench(options: Options) -> bool:
    """For each database: seed, serve, check, measure, report; the last line is the lowest
    ratio. Returns whether the numbers can be trusted."""
    ratios, trusted = [], True
    for name in options.databases:
        with ExitStack() as stack:
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-")))
            database_url = testbed.database_url(stack, name, workdir, options.postgres_url)
            key, answer, targets = serve_both(stack, workdir, database_url)
            runs = measure(targets, key, options)
        ratio, ok = conclude(labels_for(answer, DATABASES[name]), runs, options)
        ratios.append(ratio)
        trusted = trusted and ok
    print(f"ratio {min(ratios):.2f}")
    return trusted


def serve_both(
    stack: ExitStack, workdir: Path, database_url: str
) -> tuple[str, Answer, dict[str, Target]]:
    """Seed the club, start both servers, check they answer the same bytes.

    Returns the API key, our answer, and what to load by name (the conditional request too
    when ours answers with an ETag, after checking it is answered 304).
    """
    secret_key = secrets.token_urlsafe(30)  # 40 characters
    env = child_environment(workdir, secret_key, database_url)
    key = seed(database_url, workdir, secret_key)
    ours_port, bare_port = free_ports(2)
    ours = wait_ready(start_ours(stack, env, workdir, ours_port), url_of(ours_port), key)
    bare = start_bare(stack, env, workdir, ours.body, bare_port)
    if wait_ready(bare, url_of(bare_port), key).body != ours.body:
        raise BenchError("the bare server does not answer the same bytes as clubwire")
    targets = {"clubwire": Target(url_of(ours_port)), "bare": Target(url_of(bare_port))}
    if ours.etag is not None:
        conditional = Target(url_of(ours_port), (f"If-None-Match: {ours.etag}",))
        status = fetch(conditional.url, key, conditional.headers).status
        if status != 304:
            raise BenchError(f"a request with the ETag clubwire gave answered {status}, not 304")
        targets["304"] = conditional
    return key, ours, targets


def labels_for(answer: Answer, database: str) -> dict[str, str]:
    count = program_count(answer.body)
    return {
        "clubwire": f"GET /api/v1/programs ({count} programs, {database}, "
        "key verified per request):",
        "bare": f"FastAPI route returning the same {len(answer.body):,} bytes from memory:",
        "304": f"the same with If-None-Match: {answer.etag} (304, no body):",
    }


def conclude(
    labels: dict[str, str], runs: dict[str, list[Run]], options: Options
) -> tuple[float, bool]:
    """Print the report and warnings; the ratio ours/bare, and False when a server answered
    4xx or 5xx."""
    results = {name: best(measured) for name, measured in runs.items()}
    report(labels, results, options)
    for warning in problems(runs):
        print(warning)
    ratio = results["clubwire"].requests_per_second / results["bare"].requests_per_second
    print(f"ratio ours/bare {ratio:.2f}")
    if "304" in results:
        faster = results["304"].requests_per_second / results["clubwire"].requests_per_second
        print(f"304/200 {faster:.2f}   (target ≥ 1.00: a 304 at least as fast as a 200)")
    return ratio, all(run.non_2xx == 0 for measured in runs.values() for run in measured)


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    if shutil.which("wrk") is None:
        print(f"{PROG}: wrk is not installed (apt-get install wrk)", file=sys.stderr)
        return 1
    return exit_status(PROG, lambda: bench(options))


if __name__ == "__main__":
    sys.exit(main())
