"""A batch of attempts that one row spoils: the others are recorded as they were, the bad row
as a failed attempt with a generic error, and a row refused even so is left due, to be
claimed again once its lane is given back.

Rows are made to fail for real: a trigger created in the test database raises for them.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, exc, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Result, RetrySchedule, judge
from clubwire.services.delivery import claims, events, records
from clubwire.settings import Settings
from clubwire.storage import database
from clubwire.storage.models import Attempt, Delivery
from clubwire.storage.queue import Want
from tests import triggers
from tests.factories import EPOCH, make_club, make_endpoint, registration

SCHEDULE = RetrySchedule((60, 300))
LEASE = timedelta(seconds=60)
POISON = "poison"


def _batch(sessions: sessionmaker[Session], settings: Settings) -> list[Result]:
    """Three claimed deliveries that succeeded; the last one's answer was ``POISON``."""
    with sessions.begin() as session:
        club = make_club(session)
        make_endpoint(session, club, settings)
        for _ in range(3):
            events.publish(session, club, "registration.created", registration(), EPOCH)
    with sessions.begin() as session:
        lanes = claims.take_lanes(session, EPOCH, EPOCH + LEASE, "wkr_me", 1)
        wants = {lane.endpoint_id: Want(lane, 3, EPOCH + LEASE) for lane in lanes}
        jobs, _ = claims.claim(session, EPOCH, "wkr_me", wants)
    return [
        Result(
            job,
            EPOCH,
            True,
            200,
            None,
            5,
            POISON if index == 2 else "fine",
            judge(job, True, EPOCH, SCHEDULE, 0.5),
        )
        for index, job in enumerate(sorted(jobs, key=lambda job: job.delivery_id))
    ]


def _state(sessions: sessionmaker[Session]) -> dict[str, tuple[object, ...]]:
    """By delivery: its status, attempt, next attempt, and its attempts' (code, error,
    excerpt)."""
    with sessions() as session:
        return {
            d.id: (
                d.status,
                d.attempt,
                d.next_attempt_at,
                [
                    (a.response_code, a.error, a.excerpt)
                    for a in session.scalars(select(Attempt).where(Attempt.delivery_id == d.id))
                ],
            )
            for d in session.scalars(select(Delivery))
        }


def test_a_refused_row_is_recorded_as_failed_and_the_rest_as_they_were(
    engine: Engine, sessions: sessionmaker[Session], settings: Settings
) -> None:
    triggers.refuse_attempts(engine, f"NEW.excerpt = '{POISON}'")
    batch = _batch(sessions, settings)
    with pytest.raises(exc.DBAPIError, match="poisoned"), sessions.begin() as session:
        records.record(session, batch, EPOCH)  # the batch as one: it fails

    refused = records.record_batch(sessions, batch, SCHEDULE, EPOCH).refused

    *fine, bad = (result.job.delivery_id for result in batch)
    assert [(r.delivery_id, r.stand_in_error) for r in refused] == [(bad, None)]
    assert refused[0].error in {"IntegrityError", "ProgrammingError"}  # no receiver text
    state = _state(sessions)
    due = state[bad][2]  # a failed attempt: retried as the schedule says
    assert isinstance(due, datetime)
    assert EPOCH + timedelta(seconds=60) <= due <= EPOCH + timedelta(seconds=66)
    assert state == {
        **{id_: ("succeeded", 1, None, [(200, None, "fine")]) for id_ in fine},
        bad: ("pending", 1, due, [(None, records.UNRECORDABLE, "")]),
    }


def test_when_even_the_stand_in_is_refused_the_others_still_land(
    engine: Engine, sessions: sessionmaker[Session], settings: Settings
) -> None:
    batch = _batch(sessions, settings)
    *fine, bad = (result.job.delivery_id for result in batch)
    triggers.refuse_attempts(engine, f"NEW.delivery_id = '{bad}'")

    refused = records.record_batch(sessions, batch, SCHEDULE, EPOCH).refused

    assert [(r.delivery_id, r.error == r.stand_in_error) for r in refused] == [(bad, True)]
    assert _state(sessions) == {
        **{id_: ("succeeded", 1, None, [(200, None, "fine")]) for id_ in fine},
        bad: ("pending", 0, EPOCH, []),  # left due, to be sent again
    }


def test_a_database_that_cannot_be_reached_is_not_taken_for_a_bad_row(
    sessions: sessionmaker[Session], settings: Settings, tmp_path: Path
) -> None:
    batch = _batch(sessions, settings)
    unreachable = (
        f"sqlite:///{tmp_path}/missing/clubwire.db"
        if settings.is_sqlite
        else "postgresql+psycopg://postgres@127.0.0.1:1/clubwire"
    )
    engine = create_engine(unreachable)

    with pytest.raises(exc.OperationalError):  # the batch is kept, to be tried again whole
        records.record_batch(database.sessions(engine), batch, SCHEDULE, EPOCH)
    engine.dispose()
    assert all(state[1] == 0 for state in _state(sessions).values())
