"""The worker's way to the queue (ADR 0008): the threads its statements run on, the sessions
they use, and how it is woken; each database's queue makes its own (``Queue.link``)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import ParamSpec, TypeVar

from sqlalchemy.orm import Session, sessionmaker

P = ParamSpec("P")
T = TypeVar("T")

Wake = Callable[[Collection[str] | None], None]  # the endpoints that changed; None: any may have


class Link:
    """Claims (reads), leases and records each run on one of the link's threads (a thread
    may serve more than one of them), in ``sessions``; ``listen`` calls ``wake`` when work
    may have come."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        claims: ThreadPoolExecutor,
        leases: ThreadPoolExecutor,
        records: ThreadPoolExecutor,
    ) -> None:
        self.sessions = sessions
        self._claims = claims
        self._leases = leases
        self._records = records

    async def claiming(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function``, which only reads, on the claims' thread."""
        return await _on(self._claims, function, *args, **kwargs)

    async def leasing(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function``, which takes or renews leases, on the leases' thread."""
        return await _on(self._leases, function, *args, **kwargs)

    async def recording(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function``, which records attempts or gives lanes back, on the records' thread."""
        return await _on(self._records, function, *args, **kwargs)

    async def listen(self, wake: Wake) -> None:
        """Call ``wake`` with the endpoints that changed (None: any may have), until
        cancelled."""
        raise NotImplementedError

    def close(self) -> None:
        """Once the statements under way are done."""
        for executor in {self._claims, self._leases, self._records}:
            executor.shutdown(wait=True)


async def _on(
    executor: ThreadPoolExecutor, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs
) -> T:
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(executor, lambda: function(*args, **kwargs))
