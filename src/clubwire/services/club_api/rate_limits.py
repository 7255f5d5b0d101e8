"""Counting the club data API's requests against its rate limits, across every API process
(ADR 0009), with no query on the request path.

Each process counts in memory, so a request costs a dictionary look-up; once a second
(``share``) it adds what it counted to the shared table in one statement, which answers with
every process's totals for the partitions it has seen in this window. A process therefore
lets through at most what it counted itself in the last second beyond a limit the others
reached. When the database cannot be reached, each process goes on counting alone and
shares what it counted once it can; an outage is logged once it has lasted a few shares (a
restart of the database is not one), a fault at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import rate_limits
from clubwire.domain.rate_limits import Policy, Standing, Window
from clubwire.storage import database, rate_counts

SHARE_EVERY = 1.0  # seconds
QUIET_FOR = 5  # shares in a row that the database's being unavailable fails, untold

# Named as before the move into a sub-package: log lines carry the name ("logger").
log = logging.getLogger("clubwire.services.rate_limits")


class RateCounter:
    def __init__(
        self, sessions: sessionmaker[Session], clock: Callable[[], float] = time.time
    ) -> None:
        self._sessions = sessions
        self._clock = clock
        self._shared: dict[str, tuple[int, int]] = {}  # bucket → window, every process's total
        self._mine: dict[str, tuple[int, int]] = {}  # bucket → window, counted here since
        self._sending: dict[str, tuple[int, int]] = {}  # counted here, being shared right now
        self._pruned = 0  # the window the shared table was last pruned in

    def take(self, policy: Policy, bucket: str) -> Standing:
        """Count a request in ``bucket`` unless that would pass ``policy``'s quota; where it
        stands with this request (over: refused, and not counted)."""
        (standing,) = self.take_each([(policy, bucket)])
        return standing

    def take_each(self, limits: Sequence[tuple[Policy, str]]) -> list[Standing]:
        """Count a request in every bucket, each under its policy, unless that would pass
        one of their quotas: then it is counted in none. Where it stands under each (the one
        over refuses it; the others are told it was not counted)."""
        window = Window.at(self._clock())
        standings = [Standing(p, self._used(b, window.number) + 1, window) for p, b in limits]
        if rate_limits.refusing(standings) is not None:
            return [standing if standing.over else standing.uncounted() for standing in standings]
        for _, bucket in limits:
            self._count(bucket, window.number)
        return standings

    def look(self, policy: Policy, bucket: str) -> Standing:
        """Where a request in ``bucket`` would stand, counted or not."""
        window = Window.at(self._clock())
        return Standing(policy, self._used(bucket, window.number) + 1, window)

    def _count(self, bucket: str, number: int) -> None:
        window, count = self._mine.get(bucket, (number, 0))
        self._mine[bucket] = (number, count + 1 if window == number else 1)

    async def keep_sharing(self) -> None:
        """Share every ``SHARE_EVERY`` seconds, until cancelled. A failure is told once: a
        fault at once, with its traceback; the database unavailable, in one line, once it
        has failed ``QUIET_FOR`` shares in a row."""
        failed, told = 0, False
        while True:
            await asyncio.sleep(SHARE_EVERY)
            try:
                await self.share()
            except Exception as exc:
                failed += 1
                if not told and (failed >= QUIET_FOR or not database.unavailable(exc)):
                    _tell(exc)
                    told = True
            else:
                if told:
                    log.info("sharing API request counts again")
                failed, told = 0, False

    async def share(self) -> None:
        """Add what this process counted to the shared totals and learn every process's.
        What cannot be shared now is kept for the next time."""
        number = Window.at(self._clock()).number
        mine, self._mine = self._mine, {}
        counts = [(b, w, c) for b, (w, c) in mine.items() if w == number]
        seen = [(b, number, 0) for b, (w, _) in self._shared.items() if w == number]
        counts += [count for count in seen if count[0] not in mine]
        if not counts:
            return
        self._sending = mine  # still counted by requests meanwhile: the share takes a while
        try:
            totals = await asyncio.to_thread(self._store, counts, number)
        except Exception:
            for bucket, window, count in counts:
                if count:
                    self._keep(bucket, window, count)
            raise
        finally:
            self._sending = {}
        self._shared = {bucket: (window, total) for bucket, window, total in totals}

    def _store(self, counts: list[rate_counts.Count], number: int) -> list[rate_counts.Count]:
        prune = self._pruned < number
        with self._sessions.begin() as session:
            totals = rate_counts.add(session.connection(), counts)
            if prune:
                rate_counts.prune(session.connection(), number - 1)
        if prune:
            self._pruned = number
        return totals

    def _used(self, bucket: str, number: int) -> int:
        used = 0
        for counts in (self._shared, self._sending, self._mine):
            window, count = counts.get(bucket, (0, 0))
            if window == number:
                used += count
        return used

    def _keep(self, bucket: str, window: int, count: int) -> None:
        """Put back counts that could not be shared, beside any counted meanwhile."""
        now, later = self._mine.get(bucket, (window, 0))
        if now == window:
            self._mine[bucket] = (window, count + later)


class ApiLimits:
    """The club data API's three policies on one counter: requests per key and per club (all
    its keys together), counted together or not at all; and failed authentications per client
    address, which slow only failed authentications: a key that verifies is served whatever
    else its address sent. A policy with a quota of 0 is off: nothing is counted or told."""

    def __init__(
        self, counter: RateCounter, *, per_key: int, per_club: int, auth_failures: int
    ) -> None:
        self.counter = counter
        self._per_key = Policy(rate_limits.PER_KEY, per_key)
        self._per_club = Policy(rate_limits.PER_CLUB, per_club)
        self._failures = Policy(rate_limits.AUTH_FAILURES, auth_failures)

    def failed(self, address: str) -> list[Standing]:
        """An authentication from the address failed: counted unless the address is over its
        limit of them (then the answer is 429); where the address stands, if that is on."""
        if not self._failures.on:
            return []
        return [self.counter.take(self._failures, f"address:{address}")]

    def take(self, prefix: str, club_id: str) -> list[Standing]:
        """A request with the key of this prefix, of this club: counted against both unless
        either is over its limit, then against neither; where it stands under each policy
        that is on (per key first)."""
        limits = [(self._per_key, f"key:{prefix}"), (self._per_club, f"club:{club_id}")]
        return self.counter.take_each([(policy, bucket) for policy, bucket in limits if policy.on])


def _tell(exc: Exception) -> None:
    if database.unavailable(exc):
        log.warning("sharing API request counts: the database is unavailable; counting alone")
    else:
        log.error("sharing API request counts failed; counting alone meanwhile", exc_info=exc)
