"""The worker's way to the queue (ADR 0008): where its statements run, the sessions they use,
and how it is woken; each database's queue makes its own (``Queue.link``). SQLite's run on
threads of the link's own; PostgreSQL's on the event loop, through asynchronous connections."""

from __future__ import annotations

import abc
import asyncio
import logging
from collections.abc import Callable, Collection
from typing import Literal, ParamSpec, TypeVar

from sqlalchemy.orm import Session, sessionmaker

log = logging.getLogger(__name__)

LISTEN_AGAIN_AFTER = 1.0  # seconds after listening failed

P = ParamSpec("P")
T = TypeVar("T")

# The endpoints with deliveries due (None: any may have), and whether the endpoints themselves
# changed (a new URL, secret or max rate: read them again).
Wake = Callable[[Collection[str] | None, bool], None]
Step = Literal["claims", "leases", "records"]


class Link(abc.ABC):
    """Claims (reads), leases and records each run where the link puts them, in
    ``sessions``; ``listen`` calls ``wake`` when work may have come."""

    def __init__(self, sessions: sessionmaker[Session]) -> None:
        self.sessions = sessions

    async def claiming(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function``, which only reads."""
        return await self._run("claims", lambda: function(*args, **kwargs))

    async def leasing(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function``, which takes or renews leases."""
        return await self._run("leases", lambda: function(*args, **kwargs))

    async def recording(self, function: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``function``, which records attempts or gives lanes back."""
        return await self._run("records", lambda: function(*args, **kwargs))

    @abc.abstractmethod
    async def listen(self, wake: Wake) -> None:
        """Call ``wake`` with the endpoints that may have deliveries due or changed (None: any
        may have), until cancelled."""

    async def keep_listening(self, wake: Wake) -> None:
        """``listen`` until cancelled; each time it fails, log why and listen again after
        ``LISTEN_AGAIN_AFTER`` seconds (listening anew wakes the worker: anything may have
        come meanwhile). Until then the worker looks for due work at its safety poll."""
        while True:
            try:
                await self.listen(wake)
            except Exception:
                log.exception(
                    "listening for due work failed; listening again in %g s", LISTEN_AGAIN_AFTER
                )
            await asyncio.sleep(LISTEN_AGAIN_AFTER)

    @abc.abstractmethod
    async def close(self) -> None:
        """Once the statements under way are done."""

    @abc.abstractmethod
    async def _run(self, step: Step, call: Callable[[], T]) -> T:
        """``call``, one of the worker's database steps, where the link runs ``step``."""
