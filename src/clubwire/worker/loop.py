"""The delivery loop: find due work, claim it endpoint by endpoint, attempt it, record it.

Each endpoint in play has a lane: the jobs claimed for it, waiting, and up to
``max_in_flight_per_endpoint`` runners attempting them one after another, so a slow endpoint
holds only its own lane and never starves the others; at most ``max_in_flight`` attempts run
at once in all. A lane asks for more while it still has a round of attempts waiting, so it
does not run dry; endpoints not in play are found by ``claims.due_endpoints`` when the
worker is woken (a publish in this process, ``NOTIFY`` on PostgreSQL) and at every poll.
Neither ever reads past another endpoint's deliveries, however many are due. Claims for
several lanes share one transaction, and results are recorded in batches by one task (a
batch that one row spoils is recorded row by row, so no answer can hold up the others).
Database work runs on a thread of its own (on PostgreSQL, claims and records on one each).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import ParamSpec, TypeVar

import psycopg
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.domain.retry import RetrySchedule
from clubwire.services import claims, records
from clubwire.services.events import NOTIFY_CHANNEL
from clubwire.settings import Settings
from clubwire.worker.attempts import Attempter

log = logging.getLogger(__name__)

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


@dataclass(slots=True, eq=False)
class Lane:
    """One endpoint's claimed jobs: waiting in ``queue``, or held by one of its ``runners``."""

    queue: deque[claims.Job] = field(default_factory=deque)
    runners: int = 0
    dry: bool = False  # its last claim found fewer due deliveries than it asked for

    @property
    def held(self) -> int:
        return len(self.queue) + self.runners


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
        self._attempt_span = timedelta(seconds=settings.attempt_timeout)
        self._db = ThreadPoolExecutor(1, thread_name_prefix="clubwire-db")
        # PostgreSQL: records overlap claims (they touch disjoint deliveries). SQLite has one
        # writer anyway, so both share the one thread there.
        self._record_db = (
            self._db
            if settings.is_sqlite
            else ThreadPoolExecutor(1, thread_name_prefix="clubwire-db-record")
        )
        # A lane holds its attempts in flight and up to ``rounds`` more rounds waiting, so each
        # waiting job's attempt still ends inside its lease; it asks for more once it has room
        # for half a round (or one job), and the worker holds at most as many rounds in all.
        limit, rounds = settings.max_in_flight_per_endpoint, backlog_rounds(settings)
        self._limit = limit
        self._lane_depth = limit * (rounds + 1)
        self._depth = settings.max_in_flight * (rounds + 1)
        self._refill = max(1, limit * rounds // 2)
        self._lanes: dict[str, Lane] = {}
        self._wanting: dict[str, None] = {}  # endpoints to claim for, in the order they asked
        self._discover = True  # look for endpoints with due deliveries in the next round
        self._discovered_at = 0.0  # when it last looked (the event loop's clock)
        self._given_back: list[claims.Job] = []  # leases too short to attempt in
        self._gate = asyncio.Semaphore(settings.max_in_flight)
        self._runners: set[asyncio.Task[None]] = set()
        self._results: list[records.Result] = []
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
        for lane in self._lanes.values():
            self._given_back.extend(lane.queue)
            lane.queue.clear()
        await self._give_back()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.attempt_timeout + 5
        while self._runners and loop.time() < deadline:
            await asyncio.wait(set(self._runners), timeout=deadline - loop.time())

    def wake(self) -> None:
        """Look for due deliveries now (a publish in this process)."""
        self._discover = True
        self._wake.set()

    async def _claim_round(self) -> bool:
        """Claim for the lanes that asked and, when it is time, for the endpoints found due;
        False when there was nothing to claim for."""
        try:
            await self._give_back()
            if self._time_to_discover():
                self._found(await self._in_db(self._db, self._due_endpoints))
            wants = self._wants()
            if not wants:
                return False
            try:
                jobs = await self._in_db(self._db, self._claim, wants)
            except BaseException:
                self._found(wants)
                raise
        except Exception:
            log.exception("claiming due deliveries failed; trying again shortly")
            self._discover = True
            await asyncio.sleep(RETRY_AFTER_ERROR)
            return False
        self._deal(jobs, wants)
        return True

    def _time_to_discover(self) -> bool:
        """Woken, or a poll interval since the last look (busy or not: new endpoints and
        retries coming due are found while the lanes keep claiming)."""
        now = asyncio.get_running_loop().time()
        if not (self._discover or now - self._discovered_at >= self._poll):
            return False
        self._discover, self._discovered_at = False, now
        return True

    def _found(self, endpoint_ids: Iterable[str]) -> None:
        """Endpoints with due deliveries: claim for them, and their lanes may ask again."""
        for endpoint_id in endpoint_ids:
            lane = self._lanes.get(endpoint_id)
            if lane is not None:
                lane.dry = False
            self._wanting.setdefault(endpoint_id)

    def _wants(self) -> dict[str, int]:
        """How many jobs to claim for each endpoint that wants some, within the worker's
        depth; endpoints left without room keep waiting for the next round."""
        room = self._depth - sum(lane.held for lane in self._lanes.values())
        wants = {}
        for endpoint_id in list(self._wanting):
            lane = self._lanes.get(endpoint_id)
            lane_room = self._lane_depth - (lane.held if lane else 0)
            if lane_room < self._refill:
                del self._wanting[endpoint_id]  # it asks again when it has room
            elif room > 0:
                wants[endpoint_id] = min(lane_room, room)
                room -= wants[endpoint_id]
                del self._wanting[endpoint_id]
        return wants

    def _deal(self, jobs: list[claims.Job], wants: dict[str, int]) -> None:
        """Queue the claimed jobs in their lanes and start runners for them."""
        got: Counter[str] = Counter()
        for job in jobs:
            self._lanes.setdefault(job.endpoint_id, Lane()).queue.append(job)
            got[job.endpoint_id] += 1
        for endpoint_id, wanted in wants.items():
            lane = self._lanes.get(endpoint_id)
            if lane is None:
                continue
            lane.dry = got[endpoint_id] < wanted
            for _ in range(min(self._limit - lane.runners, len(lane.queue))):
                lane.runners += 1
                runner = asyncio.create_task(self._run_lane(endpoint_id, lane))
                self._runners.add(runner)
                runner.add_done_callback(self._runners.discard)

    async def _run_lane(self, endpoint_id: str, lane: Lane) -> None:
        """Attempt the lane's jobs one after another until none is waiting."""
        try:
            while lane.queue:
                job = lane.queue.popleft()
                if not lane.dry and self._lane_depth - lane.held >= self._refill:
                    self._wanting.setdefault(endpoint_id)
                    self._wake.set()
                await self._attempt(job)
                if self._wanting or self._given_back:
                    self._wake.set()  # room in all may be what they wait for
        finally:
            lane.runners -= 1
            if not lane.held and self._lanes.get(endpoint_id) is lane:
                del self._lanes[endpoint_id]

    async def _attempt(self, job: claims.Job) -> None:
        async with self._gate:
            if job.lease_until - self._clock() < self._attempt_span:
                self._given_back.append(job)  # it waited too long: another round may take it
                return
            try:
                result = await self._attempter.attempt(job)
            except Exception:
                log.exception(
                    "attempt of %s failed unexpectedly; its lease will run out", job.delivery_id
                )
                return
        self._results.append(result)

    async def _give_back(self) -> None:
        if self._given_back:
            jobs, self._given_back = self._given_back, []
            await self._in_db(self._db, self._release, jobs)

    async def _idle(self, stop: asyncio.Event) -> None:
        """Until woken, stopped, or it is time to poll for due deliveries."""
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
                    self.wake()
                    async for _ in conn.notifies():
                        self.wake()
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

    def _due_endpoints(self) -> list[str]:
        with self._sessions() as session:
            return claims.due_endpoints(session, self._clock())

    def _claim(self, wants: dict[str, int]) -> list[claims.Job]:
        with self._sessions.begin() as session:
            return claims.claim(session, self._clock(), self._lease, wants)

    def _release(self, jobs: list[claims.Job]) -> None:
        with self._sessions.begin() as session:
            claims.release(session, jobs)

    def _record(self, results: list[records.Result]) -> None:
        now = self._clock()
        for refused in records.record_batch(self._sessions, results, self._schedule, now):
            tell_refused(refused)


def tell_refused(refused: records.Refused) -> None:
    """One line for a result the database refused, by ids and kinds of error only."""
    if refused.stand_in_error is None:
        log.warning(
            "the attempt of %s could not be recorded as it was (%s); recorded as failed",
            refused.delivery_id,
            refused.error,
        )
    else:
        log.error(
            "the attempt of %s could not be recorded (%s, then %s); it is sent again when "
            "its lease runs out",
            refused.delivery_id,
            refused.error,
            refused.stand_in_error,
        )
