"""The delivery loop: the async shell around the lane policy (``worker.lanes``), in named
steps (ADR 0008): **claim** (lease lanes with due work, claim their jobs), **attempt** (one
runner per allowed attempt in flight, each sending its lane's jobs one after another; each
attempt judged once), **record** (in batches, by one task; a batch one row spoils is
recorded row by row), and **give back** (a lane, once all its attempts are recorded).

The worker is woken by the queue (``NOTIFY`` naming endpoints on PostgreSQL, another
connection's commit to the file on SQLite); idle, it sleeps until the earliest lane is due or
a leased lane's lease runs out. Database work runs where the queue's link puts it
(``claims.link``): claims (reads), leases and records, on PostgreSQL on this event loop, on
SQLite on threads of the link's own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from sqlalchemy.orm import Session, sessionmaker

from clubwire import ids
from clubwire.domain import timestamps
from clubwire.domain.delivering import Job, Result, RetrySchedule
from clubwire.services.delivery import claims, records
from clubwire.services.delivery.attempts import Attempter
from clubwire.services.mail import notifications
from clubwire.settings import Settings
from clubwire.storage.queue import Claimed, LeasedLane
from clubwire.worker.lanes import Asked, LanePolicy, Limits, Wants

log = logging.getLogger(__name__)

RECORD_INTERVAL = 0.02
SAFETY_POLL = 30.0  # the longest an idle worker sleeps without being woken
RETRY_AFTER_ERROR = 1.0


class Worker:
    """Delivers webhooks until stopped. ``run`` runs, on the running event loop, the claim
    loop (claim rounds; idle, it sleeps until woken or until work comes due), the lanes'
    runners (one attempt each at a time) and the record loop (records in batches, then gives
    lanes back); ``wake`` is what the queue's listener calls when endpoints may have work due
    or changed. What the lanes do next is ``LanePolicy``'s to decide; the database steps run
    where the queue's link puts them."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        attempter: Attempter,
        clock: Callable[[], datetime] = timestamps.utc_now,
    ) -> None:
        self._settings = settings
        self._attempter = attempter
        self._clock = clock
        self._schedule = RetrySchedule(settings.retry_schedule)
        self._mail = notifications.for_settings(settings)
        self._attempt_span = timedelta(seconds=settings.attempt_timeout)
        self._token = ids.new_id("wkr")
        self._link = claims.link(sessions)
        self._lanes = LanePolicy(Limits.of(settings))
        self._gate = asyncio.Semaphore(settings.max_in_flight)
        self._runners: set[asyncio.Task[None]] = set()
        self._results: list[Result] = []
        self._flushing = asyncio.Lock()
        self._wake = asyncio.Event()
        self._recordable = asyncio.Event()  # results to record, or lanes that may be done

    async def run(self, stop: asyncio.Event) -> None:
        """Deliver until ``stop`` is set; then finish the attempts in flight, record them and
        give every lane back."""
        queue_listener = self._link.keep_listening(self.wake)
        helpers = [asyncio.create_task(self._record_loop()), asyncio.create_task(queue_listener)]
        try:
            while not stop.is_set():
                if not await self._claim_round():
                    await self._idle(stop)
            await self._finish_in_flight()
        finally:
            for helper in helpers:
                helper.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)
            await self._link.close()

    def wake(self, endpoint_ids: Collection[str] | None = None, changed: bool = True) -> None:
        """Endpoints may have deliveries due (None: any may), or changed; see
        ``LanePolicy.wake``."""
        self._lanes.wake(endpoint_ids, changed)
        self._wake.set()

    # -- claim ------------------------------------------------------------------------------

    async def _claim_round(self) -> bool:
        """Lease lanes and claim jobs for the lanes that asked (``LanePolicy.claim_round``);
        False when there was nothing to do."""
        loop = asyncio.get_running_loop()
        try:
            with self._lanes.claim_round(loop.time(), self._clock()) as claim_round:
                dealt = await claim_round.run(self._lease_lanes, self._claim_jobs, loop.time)
        except Exception:
            log.exception("claiming due deliveries failed; trying again shortly")
            self._lanes.claim_failed()
            await asyncio.sleep(RETRY_AFTER_ERROR)
            return False
        for endpoint_id in dealt.runners:
            self._start_runner(endpoint_id)
        self._recordable.set()  # a lane that found nothing is done: to give back
        return dealt.worked

    async def _lease_lanes(
        self, now: datetime, until: datetime, asked: Asked, renew: list[str]
    ) -> list[LeasedLane]:
        return await self._link.leasing(self._take_lanes, now, until, asked, renew)

    async def _claim_jobs(self, now: datetime, wants: Wants) -> Claimed:
        return await self._link.claiming(self._read_jobs, now, wants)

    # -- attempt ----------------------------------------------------------------------------

    def _start_runner(self, endpoint_id: str) -> None:
        runner = asyncio.create_task(self._run_lane(endpoint_id))
        self._runners.add(runner)
        runner.add_done_callback(self._runners.discard)

    async def _run_lane(self, endpoint_id: str) -> None:
        """Attempt the lane's jobs one after another until none is waiting."""
        loop = asyncio.get_running_loop()
        try:
            while (job := self._lanes.next_job(endpoint_id, loop.time())) is not None:
                if self._lanes.waiting:
                    self._wake.set()
                result = await self._attempt(job)
                if result is not None:
                    for _ in range(self._lanes.attempted(result, loop.time())):
                        self._start_runner(endpoint_id)
                if self._lanes.waiting:
                    self._wake.set()  # room in all may be what they wait for
        finally:
            self._lanes.runner_ended(endpoint_id, loop.time())
            self._recordable.set()  # the lane may be done: to give back
            if self._lanes.waiting:
                self._wake.set()

    async def _attempt(self, job: Job) -> Result | None:
        """The attempt's result, to record (None: none to record)."""
        await self._place(job.endpoint_id)
        try:
            if self._lanes.lease_until(job) - self._clock() < self._attempt_span:
                self._lanes.drop(job.endpoint_id, [job])  # claimed again in a later round
                return None
            try:
                result = await self._attempter.attempt(job)
            except Exception:
                log.exception(
                    "attempt of %s failed unexpectedly; it is claimed again after its lane "
                    "is given back",
                    job.delivery_id,
                )
                return None
        finally:
            self._gate.release()
        self._results.append(result)
        self._recordable.set()
        return result

    async def _place(self, endpoint_id: str) -> None:
        """A place among the attempts in flight (the caller releases ``_gate``), at the
        lane's pace: the pace is kept from when attempts really start, so waiting for the
        place never lets two start closer than a max rate allows. A coroutine, not an async
        context manager, which cost 2 µs an attempt more."""
        loop = asyncio.get_running_loop()
        while True:
            if (wait := self._lanes.pace(endpoint_id, loop.time())) > 0:
                await asyncio.sleep(wait)
            await self._gate.acquire()
            if self._lanes.starts(endpoint_id, loop.time()):
                return
            self._gate.release()

    async def _finish_in_flight(self) -> None:
        """Finish the attempts in flight, drop the waiting jobs (others take them once the
        lanes are given back), record, and give every lane back."""
        self._lanes.stop()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self._settings.attempt_timeout + 5
        while self._runners and loop.time() < deadline:
            await asyncio.wait(set(self._runners), timeout=deadline - loop.time())
        await self._flush()

    # -- idle -------------------------------------------------------------------------------

    async def _idle(self, stop: asyncio.Event) -> None:
        """Until woken, stopped, or the earliest lane is due (a safety poll at the latest)."""
        self._wake.clear()
        timeout = await self._until_due()
        if timeout <= 0:
            self._lanes.wake(None, changed=False)  # the time has come: claim what is due
            return
        stopping = asyncio.create_task(stop.wait())
        woken = asyncio.create_task(self._wake.wait())
        await asyncio.wait({stopping, woken}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        stopping.cancel()
        woken.cancel()
        if not self._wake.is_set():
            self._lanes.wake(None, changed=False)

    async def _until_due(self) -> float:
        """Seconds until the earliest lane is due or its lease runs out: time to look then
        (with no room for another lane, only a wake-up helps; holding lanes, it looks again
        when a retry it recorded comes due, or at the latest when a turn ends, with no read
        of the heads each time it pauses)."""
        if not self._lanes.room_for_lanes():
            return SAFETY_POLL
        if self._lanes.due_now():
            return 0.0
        if self._lanes.lanes:  # busy: its runners wake it, and each turn's end looks again
            return self._lanes.until_retry(self._clock(), self._lanes.limits.turn)
        try:
            due = await self._link.claiming(self._next_due)
        except Exception:
            log.exception("reading when deliveries are next due failed")
            return RETRY_AFTER_ERROR
        if due is None:
            return SAFETY_POLL
        return min(SAFETY_POLL, max(0.0, (due - self._clock()).total_seconds()))

    # -- record -----------------------------------------------------------------------------

    async def _record_loop(self) -> None:
        """Record when there is something to record or a lane to give back (one that lingered
        its time, at the latest), gathering what comes in ``RECORD_INTERVAL`` into one batch;
        idle, it sleeps."""
        loop = asyncio.get_running_loop()
        while True:
            lingering = self._lanes.until_lingered(loop.time())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._recordable.wait(), lingering)
            await asyncio.sleep(RECORD_INTERVAL)
            self._recordable.clear()
            try:
                await self._flush()
            except Exception:
                log.exception("recording attempts failed; trying again shortly")
                self._recordable.set()
                await asyncio.sleep(RETRY_AFTER_ERROR)

    async def _flush(self) -> None:
        """Record the results, then give back the lanes that are done."""
        async with self._flushing:
            done = self._lanes.done(asyncio.get_running_loop().time())
            batch, self._results = self._results, []
            try:
                if batch and (released := await self._link.recording(self._record, batch)):
                    self.wake(released, changed=False)  # the next of a line: claim it now
                if self._lanes.recorded(batch):
                    self._wake.set()  # to look again when that retry comes due
                if done:
                    await self._link.recording(self._give_back, done)
            except BaseException:
                self._results[:0] = batch
                self._lanes.given_back(done, ok=False)
                raise
            self._lanes.given_back(done)
            if done:
                self._wake.set()

    # -- the database, where the link runs it ----------------------------------------------

    def _take_lanes(
        self, now: datetime, until: datetime, asked: Asked, renew: list[str]
    ) -> list[LeasedLane]:
        count, named = asked
        with self._link.sessions.begin() as session:
            return claims.take_lanes(session, now, until, self._token, count, named, renew)

    def _read_jobs(self, now: datetime, wants: Wants) -> Claimed:
        with self._link.sessions() as session:
            return claims.claim(session, now, self._token, wants)

    def _next_due(self) -> datetime | None:
        with self._link.sessions() as session:
            return claims.next_due(session, self._clock())

    def _give_back(self, endpoint_ids: list[str]) -> None:
        with self._link.sessions.begin() as session:
            claims.give_back(session, endpoint_ids, self._token, self._clock())

    def _record(self, results: list[Result]) -> list[str]:
        """Record the results; the endpoints whose next delivery in order was released."""
        now = self._clock()
        batch = records.record_batch(self._link.sessions, results, self._schedule, now, self._mail)
        for refused in batch.refused:
            records.tell_refused(refused)
        return batch.released
