"""The delivery loop: claim → attempt → record, concurrently, in batches.

At most ``max_in_flight`` attempts run at once, and at most ``max_in_flight_per_endpoint``
to one endpoint, so one slow endpoint cannot starve the others. Jobs claimed beyond an
endpoint's limit wait in a short backlog in memory; endpoints whose backlog is full are left
out of the next claim. Results are recorded in batches by one task. Database work
runs on a thread of its own (on PostgreSQL, claims and records on one each); PostgreSQL
workers are woken by ``LISTEN/NOTIFY``.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from typing import ParamSpec, TypeVar

import psycopg
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.domain.retry import RetrySchedule
from clubwire.services import dispatch
from clubwire.services.events import NOTIFY_CHANNEL
from clubwire.settings import Settings
from clubwire.worker.attempts import Attempter

log = logging.getLogger(__name__)

CLAIM_BATCH = 200
RECORD_INTERVAL = 0.02
POLL_SQLITE = 0.025
POLL_POSTGRES = 1.0
RETRY_AFTER_ERROR = 1.0
BACKLOG_ROUNDS = 2

P = ParamSpec("P")
T = TypeVar("T")


def backlog_rounds(settings: Settings) -> int:
    """Rounds of attempts a claimed job may wait behind at its endpoint: up to
    ``BACKLOG_ROUNDS``, so long as waiting and then its own attempt end inside its lease."""
    rounds = int(settings.lease_seconds // settings.attempt_timeout) - 1
    return max(0, min(BACKLOG_ROUNDS, rounds))


class Worker:
    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        attempter: Attempter,
        clock: Callable[[], datetime] = timestamps.utc_now,
    ) -> None:
        self._settings = settings
        self._sessions = sessions
        self._attempter = attempter
        self._clock = clock
        self._schedule = RetrySchedule(settings.retry_schedule)
        self._lease = timedelta(seconds=settings.lease_seconds)
        self._db = ThreadPoolExecutor(1, thread_name_prefix="clubwire-db")
        # PostgreSQL: records overlap claims (they touch disjoint deliveries). SQLite has one
        # writer anyway, so both share the one thread there.
        self._record_db = (
            self._db
            if settings.is_sqlite
            else ThreadPoolExecutor(1, thread_name_prefix="clubwire-db-record")
        )
        self._per_endpoint: Counter[str] = Counter()
        # Claimed jobs waiting for room at their endpoint, so freed room is refilled without a
        # database round trip and claims come in fewer, larger batches. At most ``_waiting``
        # per endpoint: each waits at most that many rounds of attempts, and its own attempt
        # still ends inside its lease.
        self._backlog: defaultdict[str, deque[dispatch.Job]] = defaultdict(deque)
        self._waiting = settings.max_in_flight_per_endpoint * backlog_rounds(settings)
        self._tasks: set[asyncio.Task[None]] = set()
        self._results: list[dispatch.Result] = []
        self._flushing = asyncio.Lock()
        self._wake = asyncio.Event()
        self._poll = POLL_SQLITE if settings.is_sqlite else POLL_POSTGRES

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set; then finish the attempts in flight and record them."""
        helpers = [asyncio.create_task(self._record_loop())]
        if not self._settings.is_sqlite:
            helpers.append(asyncio.create_task(self._listen()))
        try:
            while not stop.is_set():
                if not await self._claim_round():
                    await self._idle(stop)
            await self._finish_in_flight()
            await self._flush()
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            self._db.shutdown(wait=True)
            self._record_db.shutdown(wait=True)

    async def _finish_in_flight(self) -> None:
        """Finish the attempts in flight; give the waiting jobs back for others to take now."""
        waiting = [job for queue in self._backlog.values() for job in queue]
        self._backlog.clear()
        if waiting:
            await self._in_db(self._db, self._release, waiting)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.attempt_timeout + 5
        while self._tasks and loop.time() < deadline:
            await asyncio.wait(set(self._tasks), timeout=deadline - loop.time())

    def wake(self) -> None:
        """Look for due deliveries now (a publish in this process)."""
        self._wake.set()

    async def _claim_round(self) -> int:
        free = self._settings.max_in_flight - len(self._tasks)
        if free <= 0:
            return 0
        limit = self._settings.max_in_flight_per_endpoint
        busy = [e for e, queue in self._backlog.items() if len(queue) >= self._waiting]
        size = min(free, CLAIM_BATCH, max(self._known_room(limit), limit))
        try:
            jobs = await self._in_db(self._db, self._claim, size, busy)
        except Exception:
            log.exception("claiming due deliveries failed; trying again shortly")
            await asyncio.sleep(RETRY_AFTER_ERROR)
            return 0
        excess = [job for job in jobs if not self._take(job, limit)]
        if excess:
            await self._in_db(self._db, self._release, excess)
        return len(jobs) - len(excess)

    def _known_room(self, limit: int) -> int:
        """Jobs the endpoints already in play can still take (in flight or waiting)."""
        known = set(self._per_endpoint) | set(self._backlog)
        most = limit + self._waiting
        return sum(most - self._per_endpoint[e] - len(self._backlog.get(e, ())) for e in known)

    def _take(self, job: dispatch.Job, limit: int) -> bool:
        """Start the job, or keep it waiting for room at its endpoint; False: no room at all."""
        if self._per_endpoint[job.endpoint_id] < limit:
            self._start(job)
            return True
        if len(self._backlog.get(job.endpoint_id, ())) < self._waiting:
            self._backlog[job.endpoint_id].append(job)
            return True
        return False

    def _start(self, job: dispatch.Job) -> None:
        self._per_endpoint[job.endpoint_id] += 1
        task = asyncio.create_task(self._attempt(job))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attempt(self, job: dispatch.Job) -> None:
        try:
            result = await self._attempter.attempt(job)
        except Exception:
            log.exception(
                "attempt of %s failed unexpectedly; its lease will run out", job.delivery_id
            )
        else:
            self._results.append(result)
        finally:
            self._next_at(job.endpoint_id)
            self._wake.set()

    def _next_at(self, endpoint_id: str) -> None:
        """An attempt to this endpoint ended: start the next one waiting, if any."""
        self._per_endpoint[endpoint_id] -= 1
        waiting = self._backlog.get(endpoint_id)
        if waiting:
            self._start(waiting.popleft())
            if not waiting:
                del self._backlog[endpoint_id]
        elif not self._per_endpoint[endpoint_id]:
            del self._per_endpoint[endpoint_id]

    async def _idle(self, stop: asyncio.Event) -> None:
        self._wake.clear()
        stopping = asyncio.create_task(stop.wait())
        woken = asyncio.create_task(self._wake.wait())
        await asyncio.wait(
            {stopping, woken}, timeout=self._poll, return_when=asyncio.FIRST_COMPLETED
        )
        stopping.cancel()
        woken.cancel()

    async def _record_loop(self) -> None:
        while True:
            await asyncio.sleep(RECORD_INTERVAL)
            try:
                await self._flush()
            except Exception:
                log.exception("recording attempts failed; trying again shortly")
                await asyncio.sleep(RETRY_AFTER_ERROR)

    async def _flush(self) -> None:
        async with self._flushing:
            if not self._results:
                return
            batch, self._results = self._results, []
            try:
                await self._in_db(self._record_db, self._record, batch)
            except BaseException:
                self._results[:0] = batch
                raise

    async def _listen(self) -> None:
        url = make_url(self._settings.sqlalchemy_url).set(drivername="postgresql")
        conninfo = url.render_as_string(hide_password=False)
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {NOTIFY_CHANNEL}")
                    self._wake.set()
                    async for _ in conn.notifies():
                        self._wake.set()
            except psycopg.Error:
                log.warning("LISTEN connection lost; polling until it is back")
                await asyncio.sleep(RETRY_AFTER_ERROR)

    async def _in_db(
        self,
        executor: ThreadPoolExecutor,
        function: Callable[P, T],
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, lambda: function(*args, **kwargs))

    def _claim(self, limit: int, busy: list[str]) -> list[dispatch.Job]:
        with self._sessions.begin() as session:
            return dispatch.claim(session, self._clock(), limit, self._lease, busy)

    def _release(self, jobs: list[dispatch.Job]) -> None:
        with self._sessions.begin() as session:
            dispatch.release(session, jobs)

    def _record(self, results: list[dispatch.Result]) -> None:
        with self._sessions.begin() as session:
            dispatch.record(session, results, self._schedule, self._clock())
