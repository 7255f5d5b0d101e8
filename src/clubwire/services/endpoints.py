"""Webhook endpoints: create, change (their headers of their own too), switch on and off,
rotate the secret, delete."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, ParamSpec, TypeVar, cast

from sqlalchemy import ColumnElement, CursorResult, Executable, func, or_, select, update
from sqlalchemy.orm import Session

from clubwire import errors, ids
from clubwire.domain import (
    addresses,
    custom_headers,
    event_catalog,
    max_rates,
    off_reasons,
    sealing,
    timestamps,
    webhook_secrets,
)
from clubwire.domain.custom_headers import Header
from clubwire.domain.delivering import SkipReason, Status
from clubwire.services import ordered_lines, secret_keys
from clubwire.settings import Settings
from clubwire.storage import queue
from clubwire.storage.models import Club, Delivery, Endpoint, Event

Resolve = Callable[[str, int], list[str]]
P = ParamSpec("P")
T = TypeVar("T")


def create_endpoint(
    session: Session,
    club: Club,
    url: str,
    kinds: Iterable[str],
    now: datetime,
    settings: Settings,
    resolve: Resolve | None = None,
    max_rate: max_rates.MaxRate | None = None,
    headers: Sequence[Header] = (),
    ordered: bool = False,
) -> tuple[Endpoint, str]:
    """Register a receiver URL; returns the endpoint and its signing secret (shown once).
    ``max_rate``: deliveries a second at most (None or NO_LIMIT: no limit); ``headers``: its
    headers of its own; ``ordered``: each resource's events one at a time, in order."""
    subscribed = subscribable(kinds)
    checked = check_url(url, settings, resolve)
    rate = max_rates.NO_LIMIT if max_rate is None else read_max_rate(max_rate)
    own = changed_headers((), headers)
    # The club's row is locked first (on PostgreSQL), so that creations racing each other
    # count one after another and the limit holds; SQLite has one writer anyway.
    session.execute(select(Club.id).where(Club.id == club.id).with_for_update())
    count = session.scalar(select(func.count()).where(Endpoint.club_id == club.id)) or 0
    if count >= settings.max_endpoints_per_club:
        raise errors.InvalidInput(
            f"A club has at most {settings.max_endpoints_per_club} webhook endpoints: "
            "delete one first."
        )
    secret = webhook_secrets.generate(ids.random_base62)
    sealer = secret_keys.sealer(session, settings)
    endpoint = Endpoint(
        id=ids.new_id("we"),
        club_id=club.id,
        url=checked,
        events=" ".join(subscribed),
        secret_sealed=sealer.seal(secret),
        headers_sealed=sealed_headers(sealer, own),
        enabled=True,
        dead_in_a_row=0,
        max_rate=_stored(rate),
        ordered=ordered,
        created_at=now,
        updated_at=now,
    )
    session.add(endpoint)
    session.flush()
    return endpoint, secret


def list_endpoints(session: Session, club_id: str) -> Sequence[Endpoint]:
    query = select(Endpoint).where(Endpoint.club_id == club_id)
    return session.scalars(query.order_by(Endpoint.created_at, Endpoint.id)).all()


def get_endpoint(session: Session, club_id: str, endpoint_id: str) -> Endpoint:
    endpoint = session.scalar(
        select(Endpoint).where(Endpoint.club_id == club_id, Endpoint.id == endpoint_id)
    )
    if endpoint is None:
        raise errors.NotFound(f"This club has no webhook endpoint {endpoint_id!r}.")
    return endpoint


def club_of_endpoint(session: Session, endpoint_id: str) -> str:
    """The club an endpoint belongs to: for operators' tools that name an endpoint by id alone."""
    club_id = session.scalar(select(Endpoint.club_id).where(Endpoint.id == endpoint_id))
    if club_id is None:
        raise errors.NotFound(f"There is no webhook endpoint {endpoint_id!r}.")
    return club_id


def update_endpoint(
    session: Session,
    club_id: str,
    endpoint_id: str,
    now: datetime,
    settings: Settings,
    url: str | None = None,
    kinds: Iterable[str] | None = None,
    resolve: Resolve | None = None,
    max_rate: max_rates.MaxRate | None = None,
    headers: Sequence[Header] = (),
    removed: Sequence[str] = (),
    ordered: bool | None = None,
) -> Endpoint:
    """Change the URL, the subscribed events, the max rate (``max_rates.NO_LIMIT`` clears
    it) and/or whether it is ordered; what is None stays as it is. Headers of its own: those
    named in ``removed`` are taken out, then each of ``headers`` is set, replacing one of the
    same name. A switch between ordered and not applies to the deliveries not yet attempted
    (``ordered_lines.switch``)."""
    endpoint = get_endpoint(session, club_id, endpoint_id)
    rate = None if max_rate is None else read_max_rate(max_rate)
    if url is not None:
        endpoint.url = check_url(url, settings, resolve)
    if kinds is not None:
        endpoint.events = " ".join(subscribable(kinds))
    if rate is not None:
        endpoint.max_rate = _stored(rate)
    if headers or removed:
        sealer = secret_keys.sealer(session, settings)
        own = changed_headers(_opened_headers(sealer, endpoint), headers, removed)
        endpoint.headers_sealed = sealed_headers(sealer, own)
    endpoint.updated_at = now
    if ordered is not None and ordered != endpoint.ordered:
        ordered_lines.lock_endpoints(session, [endpoint.id])
        endpoint.ordered = ordered
        session.flush()
        ordered_lines.switch(session, endpoint.id, ordered, now)
    _tell_workers(session, endpoint)
    return endpoint


def disable_endpoint(
    session: Session,
    club_id: str,
    endpoint_id: str,
    now: datetime,
    reason: off_reasons.OffReason,
) -> Endpoint:
    """Switch the endpoint off for ``reason`` (who did it); its waiting deliveries are kept as
    skipped. One already off stays as it was, with its first reason."""
    endpoint = get_endpoint(session, club_id, endpoint_id)
    if endpoint.enabled:
        endpoint.enabled = False
        endpoint.disabled_reason = reason
        endpoint.disabled_at = now
        endpoint.updated_at = now
        skip_waiting(session, Delivery.endpoint_id == endpoint.id, now)
    return endpoint


def enable_endpoint(
    session: Session, club_id: str, endpoint_id: str, now: datetime, resend_skipped: bool = False
) -> tuple[Endpoint, int]:
    """Switch the endpoint on (resetting dead in a row); returns it and how many skipped
    deliveries were queued again."""
    endpoint = get_endpoint(session, club_id, endpoint_id)
    endpoint.enabled = True
    endpoint.disabled_reason = None
    endpoint.disabled_at = None
    endpoint.dead_in_a_row = 0
    endpoint.updated_at = now
    if not resend_skipped:
        return endpoint, 0
    resent = session.scalars(
        update(Delivery)
        .where(Delivery.endpoint_id == endpoint.id, *_RESENDABLE)
        .values(
            status=Status.PENDING,
            skipped_reason=None,
            next_attempt_at=now,
            next_attempt_asked=False,
            updated_at=now,
        )
        .returning(Delivery.id)
        .execution_options(synchronize_session=False),
    ).all()
    if resent:
        if endpoint.ordered:
            ordered_lines.enter(session, endpoint.id, resent, now)
        connection = session.connection()
        queue.on(connection).mark_due(connection, [endpoint.id], now)
    return endpoint, len(resent)


# The skipped deliveries that switching an endpoint on may send: skipped while it (or its
# club's module) was off, never those of an erased member, nor one whose payload expired.
_RESENDABLE = (
    Delivery.status == Status.SKIPPED,
    or_(Delivery.skipped_reason.is_(None), Delivery.skipped_reason == SkipReason.OFF),
    Delivery.event.has(Event.payload_removed.is_(None)),
)


def count_skipped(session: Session, club_id: str, endpoint_id: str) -> int:
    """How many of the endpoint's deliveries were skipped (what re-enabling can resend)."""
    endpoint = get_endpoint(session, club_id, endpoint_id)
    query = select(func.count()).where(Delivery.endpoint_id == endpoint.id, *_RESENDABLE)
    return session.scalar(query) or 0


def delete_endpoint(session: Session, club_id: str, endpoint_id: str) -> Endpoint:
    """Delete the endpoint with its deliveries and their attempts; returns what it was."""
    endpoint = get_endpoint(session, club_id, endpoint_id)
    session.delete(endpoint)
    return endpoint


def rotate_secret(
    session: Session, club_id: str, endpoint_id: str, now: datetime, settings: Settings
) -> str:
    """A new signing secret, used from the next attempt on; the old one stops at once."""
    endpoint = get_endpoint(session, club_id, endpoint_id)
    secret = webhook_secrets.generate(ids.random_base62)
    endpoint.secret_sealed = secret_keys.sealer(session, settings).seal(secret)
    endpoint.updated_at = now
    _tell_workers(session, endpoint)
    return secret


def skip_waiting(session: Session, which: ColumnElement[bool], now: datetime) -> int:
    """Mark waiting deliveries matching ``which`` as skipped (their endpoint or module is
    off), and their endpoints' queue heads say when each is next due; returns how many.
    Those in order leave their lines (their endpoints' rows held first, as every change to a
    line does)."""
    ordered_lines.lock_lines_of(session, which)
    skipped = session.scalars(
        update(Delivery)
        .where(which, Delivery.status == Status.PENDING)
        .values(
            status=Status.SKIPPED,
            skipped_reason=SkipReason.OFF,
            next_attempt_at=None,
            next_attempt_asked=False,
            updated_at=now,
        )
        .returning(Delivery.endpoint_id),
        execution_options={"synchronize_session": False},
    ).all()
    if skipped:
        ordered_lines.leave(session, set(skipped))
        connection = session.connection()
        queue.on(connection).refresh(connection, set(skipped))
    return len(skipped)


def _tell_workers(session: Session, endpoint: Endpoint) -> None:
    """At commit, a worker holding the endpoint's lane reads it again (a new URL, secret or
    max rate is used from its next claim on)."""
    connection = session.connection()
    queue.on(connection).changed(connection, [endpoint.id])


def _execute(session: Session, statement: Executable) -> CursorResult[Any]:
    return cast("CursorResult[Any]", session.execute(statement))


def subscribable(kinds: Iterable[str]) -> tuple[str, ...]:
    """The chosen kinds in catalogue order: known, not ``ping``, at least one."""
    chosen = set(kinds)
    if "ping" in chosen:
        raise errors.InvalidInput("ping cannot be subscribed to: it is sent only by Send test.")
    unknown = sorted(chosen.difference(event_catalog.SUBSCRIBABLE))
    if unknown:
        known = ", ".join(event_catalog.SUBSCRIBABLE)
        raise errors.InvalidInput(f"Unknown event {', '.join(unknown)}: choose from {known}.")
    if not chosen:
        raise errors.InvalidInput(
            f"Subscribe to at least one event: {', '.join(event_catalog.SUBSCRIBABLE)}."
        )
    return tuple(kind for kind in event_catalog.SUBSCRIBABLE if kind in chosen)


def check_url(url: str, settings: Settings, resolve: Resolve | None = None) -> str:
    """The URL if it is a safe receiver (DESIGN §7); else a specific InvalidInput."""
    try:
        read = addresses.check_url(url, settings.allow_private_targets)
    except addresses.UnsafeUrl as exc:
        raise errors.InvalidInput(str(exc)) from None
    host = read.raw_host or ""
    if settings.allow_private_targets or addresses.literal_address(host) is not None:
        return url
    try:
        addresses.check_resolved(host, (resolve or _resolve)(host, read.port or 443))
    except addresses.UnsafeUrl as exc:
        raise errors.InvalidInput(str(exc)) from None
    return url


def _resolve(host: str, port: int) -> list[str]:
    """The host's addresses; none when it does not resolve (each attempt checks again)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


def read_header(line: str) -> Header:
    """A header of an endpoint's own written ``Name: value`` (the command line); BadHeaders
    saying what is wrong, never with the value."""
    return _headers_checked(custom_headers.parse, line)


def read_header_fields(name: str, value: str) -> Header:
    """A header of an endpoint's own typed as a name and a value (a form); as ``read_header``."""
    return _headers_checked(custom_headers.header, name, value)


def changed_headers(
    saved: Sequence[Header], given: Sequence[Header], removed: Sequence[str] = ()
) -> tuple[Header, ...]:
    """``saved`` changed as ``custom_headers.changed`` says; BadHeaders saying what is wrong."""
    return _headers_checked(custom_headers.changed, saved, given, removed)


def _headers_checked(read: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
    """``read``'s answer; its refusal as BadHeaders, telling which part it refused."""
    try:
        return read(*args, **kwargs)
    except custom_headers.BadName as exc:
        raise errors.BadHeaders(str(exc), part="name") from None
    except custom_headers.BadValue as exc:
        raise errors.BadHeaders(str(exc), part="value") from None
    except custom_headers.BadHeader as exc:
        raise errors.BadHeaders(str(exc)) from None


def sealed_headers(sealer: sealing.Sealer, headers: Sequence[Header]) -> str | None:
    """Headers of an endpoint's own as stored: one sealed document, or NULL for none."""
    return sealer.seal(custom_headers.dumps(headers)) if headers else None


def header_names(endpoint: Endpoint, settings: Settings) -> list[str]:
    """The names of the endpoint's headers of its own, in order (never their values); no key
    is derived for an endpoint without any (every card and list line asks)."""
    if endpoint.headers_sealed is None:
        return []
    sealer = sealing.Sealer(settings.secret_key_value())
    return [found.name for found in _opened_headers(sealer, endpoint)]


def _opened_headers(sealer: sealing.Sealer, endpoint: Endpoint) -> tuple[Header, ...]:
    if endpoint.headers_sealed is None:
        return ()
    try:
        return custom_headers.loads(sealer.open(endpoint.headers_sealed))
    except sealing.SealError:
        raise errors.ConfigurationError(secret_keys.WRONG_KEY) from None


def describe(endpoint: Endpoint, settings: Settings) -> dict[str, object]:
    """The endpoint as lists show it: never its secret, and of its headers, their names;
    ``disabledReason`` is the code (``off_reasons.OffReason``), which
    ``off_reasons.in_words`` words for people."""
    return {
        "id": endpoint.id,
        "url": endpoint.url,
        "events": endpoint.events.split(),
        "headers": header_names(endpoint, settings),
        "maxRate": endpoint.max_rate,
        "ordered": endpoint.ordered,
        "enabled": endpoint.enabled,
        "deadInARow": endpoint.dead_in_a_row,
        "lastDeliveryAt": timestamps.to_wire_or_none(endpoint.last_delivery_at),
        "lastResponseCode": endpoint.last_response_code,
        "disabledReason": endpoint.disabled_reason,
        "disabledAt": timestamps.to_wire_or_none(endpoint.disabled_at),
        "createdAt": timestamps.to_wire(endpoint.created_at),
    }


def read_max_rate(given: max_rates.MaxRate | str) -> max_rates.MaxRate:
    """A max rate given as a number or ``max_rates.NO_LIMIT``, or as typed in a form or on the
    command line (empty or ``none``: no limit); else InvalidInput saying what is wrong."""
    try:
        return max_rates.parse(given) if isinstance(given, str) else max_rates.checked(given)
    except max_rates.BadRate as exc:
        raise errors.InvalidInput(str(exc)) from None


def _stored(rate: max_rates.MaxRate) -> int | None:
    return None if isinstance(rate, max_rates.Unlimited) else rate
