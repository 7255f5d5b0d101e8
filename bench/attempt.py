"""What does one webhook attempt cost beyond aiohttp's own request, with no database?

The delivery benchmark (``bench/delivery.py``) prices the whole worker against a bare
sender; on a two-core machine its rates move by 20–30 % between identical runs. This one
isolates the attempt step (``services.delivery.attempts.Attempter.attempt``: open the secret, sign,
send through ``services.delivery.outbound.Sender`` with its address checks and capped reading, judge
the verdict, the log line and the metrics) and prices it against a bare aiohttp session
posting the same body with the same headers (ours and Standard Webhooks'), signed afresh, in
the same process and event loop (uvloop), to the same receiver (``bench/receiver.py``: TLS,
one port per endpoint), with the same concurrency (16 in flight to each of 5 endpoints).
Process CPU time per request is steady to about 1 % between rounds, so small changes to the
attempt step show.

Three kinds of run, in alternation, ``--rounds`` times: ``bare``; ``sender`` (our Sender
with bare signing: the cost of its safety rules); ``attempt`` (the whole step, logging at
info to a file). The best round of each counts. The last line is ``ratio <bare/attempt>``
(CPU per request, two decimals), for scripts to read.

Run from the repository root: ``.venv/bin/python bench/attempt.py [--requests N] [--rounds N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path

import aiohttp
import uvloop

import bare_sender
from clubwire import logs
from clubwire.domain.delivering import Job, Status, Trigger
from clubwire.domain.sealing import Sealer
from clubwire.services.delivery.attempts import attempter
from clubwire.services.delivery.outbound import Sender
from clubwire.settings import Settings
from harness import exit_status
from receiver import healthy_roles, start_receiver
from testbed import make_tls

PROG = "bench/attempt.py"
ENDPOINTS = 5
PER_ENDPOINT = 16  # in flight to each endpoint, as the worker's default
REQUESTS = 20_000
ROUNDS = 3
SECRET = "whsec_" + "ab" * 16
BODY = (
    b'{"id":"evt_0123456789abcdef01234567","type":"registration.created",'
    b'"data":{"note":"' + b"x" * 600 + b'"}}'
)

Send = Callable[[str, int], Awaitable[None]]  # one request to ``url``, number ``n``


def bare_headers(n: int) -> dict[str, str]:
    return bare_sender.bare_headers("registration.created", f"dlv_{n:024d}", SECRET, BODY)


async def bare(settings: Settings, run: Callable[[Send], Awaitable[None]]) -> None:
    context = ssl.create_default_context()
    context.load_verify_locations(cafile=str(settings.ca_bundle))
    timeout = aiohttp.ClientTimeout(total=settings.attempt_timeout)
    connector = aiohttp.TCPConnector(ssl=context, limit=0)
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False, trust_env=False
    ) as session:

        async def send(url: str, n: int) -> None:
            async with session.post(url, data=BODY, headers=bare_headers(n)) as response:
                await response.read()

        await run(send)


async def sender(settings: Settings, run: Callable[[Send], Awaitable[None]]) -> None:
    async with Sender(settings) as ours:

        async def send(url: str, n: int) -> None:
            headers = bare_headers(n)
            del headers["Accept-Encoding"]  # the Sender adds it
            await ours.post(url, BODY, headers)

        await run(send)


async def attempt(settings: Settings, run: Callable[[Send], Awaitable[None]]) -> None:
    sealed = Sealer(settings.secret_key_value()).seal(SECRET)
    lease_until = datetime.now(UTC) + timedelta(hours=1)
    async with attempter(settings) as ours:

        async def send(url: str, n: int) -> None:
            job = Job(
                delivery_id=f"dlv_{n:024d}",
                club_id="club_0123456789abcdef",
                endpoint_id=url,
                kind="registration.created",
                url=url,
                secret_sealed=sealed,
                body=BODY,
                status=Status.PENDING,
                attempts_made=0,
                trigger=Trigger.SCHEDULED,
                lease_until=lease_until,
            )
            await ours.attempt(job)

        await run(send)


KINDS = {"bare": bare, "sender": sender, "attempt": attempt}


def lanes(urls: list[str], requests: int) -> Callable[[Send], Awaitable[None]]:
    """``PER_ENDPOINT`` lanes to each URL, each sending its share one request at a time."""
    each = requests // (len(urls) * PER_ENDPOINT)

    async def run(send: Send) -> None:
        async def lane(url: str, first: int) -> None:
            for n in range(first, first + each):
                await send(url, n)

        starts = range(0, each * len(urls) * PER_ENDPOINT, each)
        pairs = zip([url for url in urls for _ in range(PER_ENDPOINT)], starts, strict=True)
        await asyncio.gather(*(lane(url, first) for url, first in pairs))

    return run


def bench(requests: int, rounds: int) -> bool:
    best: dict[str, tuple[float, float]] = {}  # kind → (CPU µs per request, requests/s)
    with ExitStack() as stack:
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="clubwire-bench-")))
        tls = make_tls(workdir)
        roles = healthy_roles(ENDPOINTS)
        receiver = start_receiver(stack, workdir, tls.server_pem, roles)
        settings = Settings(
            _env_file=None,
            home=workdir,
            allow_private_targets=True,
            ca_bundle=tls.bundle,
            secret_key="bench-" + "k" * 40,
        )
        logs.configure("info", stack.enter_context((workdir / "attempts.log").open("w")))
        run = lanes([receiver.url(role) for role in roles], requests)
        count = requests // (ENDPOINTS * PER_ENDPOINT) * ENDPOINTS * PER_ENDPOINT
        print(f"{count:,} requests a run, {ENDPOINTS} endpoints × {PER_ENDPOINT} in flight, uvloop")
        for round_ in range(rounds):
            for kind, how in KINDS.items():
                cpu, wall = time.process_time(), time.monotonic()
                uvloop.run(how(settings, run))
                cpu, wall = time.process_time() - cpu, time.monotonic() - wall
                micros, rate = cpu / count * 1e6, count / wall
                print(f"  round {round_ + 1} {kind:8} {micros:6.1f} µs CPU {rate:8,.0f} /s")
                if kind not in best or micros < best[kind][0]:
                    best[kind] = (micros, rate)
    floor = best["bare"][0]
    for kind, (micros, rate) in best.items():
        extra = f"+{micros - floor:.1f} µs" if kind != "bare" else ""
        print(f"{kind:8} {micros:6.1f} µs CPU per request {rate:8,.0f} /s  {extra}")
    print(f"ratio {floor / best['attempt'][0]:.2f}")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=REQUESTS, help=f"per run ({REQUESTS})")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help=f"rounds ({ROUNDS})")
    options = parser.parse_args(argv)
    return exit_status(PROG, lambda: bench(options.requests, options.rounds))


if __name__ == "__main__":
    sys.exit(main())
