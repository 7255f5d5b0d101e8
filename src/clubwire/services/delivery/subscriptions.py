"""What a publish reads that rarely changes, kept per process: a club's id by its slug, and
its module switch and endpoints' subscriptions (issue 38 item 2, ADR 0010).

A club's id never changes for its slug (clubs are neither deleted nor given another slug),
so it is kept as read. The switch and the subscriptions are kept with the number
``api_changes.version`` they were read at (migration 0022: triggers move it, in the
transaction of the change, with every endpoint's change of club, kinds, switch or ordering,
and every club's switch). A publish learns the number from its own first write, in the same
round trip (``events.record_event``): it is the number as of that statement, which began
after the publish did. Kept subscriptions at that number are right; at any other number
they are read again in the publish's transaction. So nothing is ever published to an
endpoint deleted, or by a subscription changed, or while a switch was off, by a change that
committed before the publish began, on any process, with no notice to wait for. The number
is one for all clubs: after any change (a key revoked, a program changed) each club's next
publish reads its subscriptions once again, as every publish did before.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.domain.recent import Recent
from clubwire.storage.models import ApiChanges, Club, Endpoint

KEPT_CLUBS = 10_000  # clubs whose ids and subscriptions a process keeps, the most recent


@dataclass(frozen=True, slots=True)
class Subscriber:
    """An endpoint as a publish sees it."""

    id: str
    kinds: frozenset[str]
    enabled: bool
    ordered: bool


@dataclass(frozen=True, slots=True)
class Subscriptions:
    version: int  # api_changes.version they are right at
    module_on: bool
    subscribers: tuple[Subscriber, ...]

    def of(self, kind: str) -> list[Subscriber]:
        """The endpoints subscribed to ``kind``, none while the module is off."""
        if not self.module_on:
            return []
        return [subscriber for subscriber in self.subscribers if kind in subscriber.kinds]


class _Kept:
    """Per database (its URL: a process may open several), at most ``KEPT_CLUBS`` clubs
    each way; publishes run on several threads at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ids: Recent[tuple[URL, str], str] = Recent(KEPT_CLUBS)
        self._subscriptions: Recent[tuple[URL, str], Subscriptions] = Recent(KEPT_CLUBS)

    def club_id(self, session: Session, slug: str) -> str:
        url = session.get_bind().engine.url
        with self._lock:
            found = self._ids.get((url, slug))
        if found is None:
            found = session.scalar(select(Club.id).where(Club.slug == slug))
            if found is None:
                raise errors.NotFound(f"There is no club {slug!r}.")
            with self._lock:
                self._ids.keep((url, slug), found)
        return found

    def subscriptions(self, session: Session, club_id: str, version: int) -> Subscriptions:
        url = session.get_bind().engine.url
        with self._lock:
            kept = self._subscriptions.get((url, club_id))
        if kept is not None and kept.version == version:
            return kept
        read = _read(session, club_id, version)
        with self._lock:
            self._subscriptions.keep((url, club_id), read)
        return read


def _read(session: Session, club_id: str, version: int) -> Subscriptions:
    """The club's switch and endpoints, in one round trip."""
    found = session.execute(
        select(
            Club.webhooks_enabled, Endpoint.id, Endpoint.events, Endpoint.enabled, Endpoint.ordered
        )
        .outerjoin(Endpoint, Endpoint.club_id == Club.id)
        .where(Club.id == club_id)
    ).all()
    if not found:
        raise errors.NotFound(f"There is no club {club_id!r}.")
    subscribers = tuple(
        Subscriber(endpoint_id, frozenset(kinds.split()), bool(enabled), bool(ordered))
        for _, endpoint_id, kinds, enabled, ordered in found
        if endpoint_id is not None
    )
    return Subscriptions(version, bool(found[0][0]), subscribers)


_kept = _Kept()


def club_id(session: Session, slug: str) -> str:
    """The id of the club ``slug``, kept once read; raises ``NotFound``."""
    return _kept.club_id(session, slug)


def subscribed(session: Session, club_id: str, kind: str, version: int) -> Sequence[Subscriber]:
    """The club's endpoints that get ``kind``, right as of ``version`` of ``api_changes``."""
    return _kept.subscriptions(session, club_id, version).of(kind)


def of_club(session: Session, club_id: str) -> Subscriptions:
    """The club's switch and subscriptions, right as of this statement (a batch's, which
    writes its events later: one read of ``api_changes.version`` for all of them)."""
    version = session.execute(select(ApiChanges.version)).scalar_one()
    return _kept.subscriptions(session, club_id, version)
