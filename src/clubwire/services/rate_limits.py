"""Counting the club data API's requests against its rate limits, across every API process
(ADR 0009), with no query on the request path.

Each process counts in memory, so a request costs a dictionary look-up; once a second
(``share``) it adds what it counted to the shared table in one statement, which answers with
every process's totals for the partitions it has seen in this window. A process therefore
lets through at most what it counted itself in the last second beyond a limit the others
reached. When the database cannot be reached, each process goes on counting alone and
shares what it counted once it can.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.rate_limits import Policy, Standing, Window
from clubwire.storage import rate_counts

SHARE_EVERY = 1.0  # seconds

log = logging.getLogger(__name__)


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
        window = Window.at(self._clock())
        used = self._used(bucket, window.number) + 1
        if used <= policy.quota:
            self._count(bucket, window.number)
        return Standing(policy, used, window)

    def look(self, policy: Policy, bucket: str) -> Standing:
        """Where a request in ``bucket`` would stand, counted or not."""
        window = Window.at(self._clock())
        return Standing(policy, self._used(bucket, window.number) + 1, window)

    def add(self, bucket: str) -> None:
        """Count one request (a failed authentication, say) in ``bucket``."""
        self._count(bucket, Window.at(self._clock()).number)

    def _count(self, bucket: str, number: int) -> None:
        window, count = self._mine.get(bucket, (number, 0))
        self._mine[bucket] = (number, count + 1 if window == number else 1)

    async def keep_sharing(self) -> None:
        """Share every ``SHARE_EVERY`` seconds, until cancelled; an outage is logged once."""
        failing = False
        while True:
            await asyncio.sleep(SHARE_EVERY)
            try:
                await self.share()
            except Exception:
                if not failing:
                    log.exception("sharing API request counts failed; counting alone meanwhile")
                failing = True
            else:
                if failing:
                    log.info("sharing API request counts again")
                failing = False

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
    """The club data API's two policies on one counter: requests per key, and failed
    authentications per client address (which slow a brute-force loop, and never another
    address or a key in use). A policy with a quota of 0 is off: nothing is counted or told."""

    def __init__(self, counter: RateCounter, per_key: int, auth_failures: int) -> None:
        self.counter = counter
        self._per_key = Policy("per-key", per_key)
        self._failures = Policy("auth-failures", auth_failures)

    def screen(self, address: str) -> Standing | None:
        """Before authenticating: where the address stands with its failed authentications,
        if it is over their limit."""
        if not self._failures.on:
            return None
        standing = self.counter.look(self._failures, _address(address))
        return standing if standing.over else None

    def failed(self, address: str) -> Standing | None:
        """An authentication from the address failed: count it; where the address stands."""
        if not self._failures.on:
            return None
        standing = self.counter.look(self._failures, _address(address))  # this one included
        self.counter.add(_address(address))
        return standing

    def take(self, prefix: str) -> Standing | None:
        """A request with the key of this prefix: counted unless over its limit."""
        if not self._per_key.on:
            return None
        return self.counter.take(self._per_key, f"key:{prefix}")


def _address(address: str) -> str:
    return f"address:{address}"
