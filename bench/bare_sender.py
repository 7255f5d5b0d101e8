"""The bare sender: the ceiling the worker is measured against.

In the benchmark's own process, on the event loop the worker uses (uvloop), with aiohttp, the
same TLS trust, keep-alive, and the same limits in flight (``max_in_flight`` in all,
``max_in_flight_per_endpoint`` per endpoint), it posts the very bodies the worker would send
to the same receiver, with the same headers and a fresh HMAC signature per request. It claims
nothing and records nothing: that is the worker's own work, which the ratio ours/bare prices.
"""

from __future__ import annotations

import asyncio
import os
import ssl
import time
from collections import Counter, defaultdict, deque
from datetime import datetime
from typing import NamedTuple

import aiohttp
import uvloop
from sqlalchemy import select

from clubwire import signing
from clubwire.domain import event_catalog, standard_signing
from clubwire.services.delivery.attempts import USER_AGENT
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Endpoint, Event
from measuring import Drain, Expected, drain_of, spent, wait_for
from receiver import Receiver
from testbed import Bed, Clubs


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


def bare_headers(kind: str, delivery_id: str, secret: str, body: bytes) -> dict[str, str]:
    """What the worker sends (DESIGN §6, and Standard Webhooks' headers beside them, ADR
    0011), signed now: the same request on the wire, so its cost is on both sides."""
    timestamp = int(time.time())
    message_id = event_catalog.id_of(body) or delivery_id
    return {
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        "X-Service-Event": kind,
        "X-Service-Delivery": delivery_id,
        signing.HEADER: signing.sign(secret, timestamp, body),
        **standard_signing.headers(secret, message_id, timestamp, body),
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
                    job.url,
                    data=job.body,
                    headers=bare_headers(job.kind, job.delivery_id, job.secret, job.body),
                    allow_redirects=False,
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
    before = spent([os.getpid()])
    failed = uvloop.run(send_bare(jobs, bed.settings))
    after = spent([os.getpid()])
    if failed:
        print(f"warning: {bed.name}: the bare sender had {failed:,} failed requests")
    return after.since(before, drain_of(wait_for(receiver, expected), expected))
