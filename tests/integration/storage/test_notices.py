"""On PostgreSQL no writer's transaction notifies (issue 38 item 4): a transaction that has
queued a ``NOTIFY`` takes a lock for the whole instance as it commits. What it has to tell
(deliveries due, an endpoint changed, what authorises an API request changed) is sent after
its commit, by the process's notifier on a connection of its own (``storage.notices``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Engine, event, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import endpoints
from clubwire.services.club_api import keys
from clubwire.services.delivery import deliveries, events
from clubwire.settings import Settings
from clubwire.storage import fastpath, notices
from clubwire.storage.models import Delivery
from clubwire.storage.queue import postgres
from tests.factories import (
    EPOCH,
    make_club,
    make_endpoint,
    make_key,
    receiver_settings,
    registration,
)

Listener = psycopg.Connection[tuple[Any, ...]]


@pytest.fixture
def listener(settings: Settings) -> Iterator[Listener]:
    if settings.is_sqlite:
        pytest.skip("NOTIFY is PostgreSQL's")
    url = make_url(settings.sqlalchemy_url).set(drivername="postgresql")
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as conn:
        yield conn


def _listen(listener: Listener) -> None:
    """Listen from now on: what the test's set-up told is sent first, and not heard."""
    assert notices.flush(5.0)
    for channel in (postgres.CHANNEL, postgres.CHANGED_CHANNEL, fastpath.CHANNEL):
        listener.execute(f"LISTEN {channel}")


def _statements(engine: Engine) -> list[str]:
    """Every statement the engine's connections run from now on."""
    seen: list[str] = []

    def executing(*args: Any) -> None:
        seen.append(args[2])

    event.listen(engine, "before_cursor_execute", executing)
    return seen


def test_a_writer_notifies_nothing_in_its_transaction_and_each_notice_comes_after_it(
    engine: Engine, sessions: sessionmaker[Session], settings: Settings, listener: Listener
) -> None:
    """A publish, a Retry, an endpoint's edit and a revocation each run no NOTIFY (it would
    come back if ``mark_due`` folded ``pg_notify`` into its statement again), and each is
    told once it has committed."""
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = make_endpoint(session, club, settings)
        key, _ = make_key(session, club)
    hooks = receiver_settings(settings)
    changes: list[tuple[Callable[[Session], object], str, str]] = [
        (
            lambda s: events.publish(s, club, "registration.created", registration(), EPOCH),
            postgres.CHANNEL,
            endpoint.id,
        ),
        (
            lambda s: deliveries.retry(
                s, club.id, s.scalars(select(Delivery.id)).first() or "", EPOCH
            ),
            postgres.CHANNEL,
            endpoint.id,
        ),
        (
            lambda s: endpoints.update_endpoint(s, club.id, endpoint.id, EPOCH, hooks, max_rate=5),
            postgres.CHANGED_CHANNEL,
            endpoint.id,
        ),
        (
            lambda s: keys.revoke_key(s, club.id, key.prefix, EPOCH),
            fastpath.CHANNEL,
            fastpath.CHANNEL,
        ),
    ]
    _listen(listener)
    statements = _statements(engine)
    for change, channel, payload in changes:
        with sessions.begin() as session:
            change(session)
        (notice,) = list(listener.notifies(timeout=5, stop_after=1))
        assert (notice.channel, notice.payload) == (channel, payload)
    assert statements
    assert [s for s in statements if "notify" in s.lower()] == []


def test_no_trigger_or_function_of_the_database_notifies(
    sessions: sessionmaker[Session], listener: Listener
) -> None:
    """0023 took ``pg_notify`` out of 0010's triggers: they move ``api_changes`` only."""
    del listener  # PostgreSQL only
    with sessions() as session:
        notifying = session.execute(
            text(
                "SELECT p.proname FROM pg_proc AS p "
                "JOIN pg_namespace AS n ON n.oid = p.pronamespace "
                "WHERE n.nspname = current_schema() AND p.prosrc ILIKE '%notify%'"
            )
        ).all()
    assert notifying == []


def test_a_rolled_back_transaction_tells_nothing(
    sessions: sessionmaker[Session], settings: Settings, listener: Listener
) -> None:
    """The first notice heard is the committed publish's, not the rolled-back one's."""
    with sessions.begin() as session:
        first, second = make_club(session, "first"), make_club(session, "second")
        dropped = make_endpoint(session, first, settings)[0].id
        kept = make_endpoint(session, second, settings)[0].id
    _listen(listener)
    with sessions() as session:
        events.publish(session, first, "registration.created", registration(), EPOCH)
        session.rollback()
    with sessions.begin() as session:
        events.publish(session, second, "registration.created", registration(), EPOCH)
    (notice,) = list(listener.notifies(timeout=5, stop_after=1))
    assert notice.payload == kept != dropped


def test_a_savepoint_released_tells_nothing_before_its_transaction_commits(
    sessions: sessionmaker[Session], settings: Settings, listener: Listener
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        endpoint_id = make_endpoint(session, club, settings)[0].id
    _listen(listener)
    with sessions.begin() as session:
        with session.begin_nested():
            events.publish(session, club, "registration.created", registration(), EPOCH)
        assert notices.flush(5.0)
        assert list(listener.notifies(timeout=0.2)) == []  # nothing handed over yet
    (notice,) = list(listener.notifies(timeout=5, stop_after=1))
    assert notice.payload == endpoint_id
