"""Rate-limit counts shared by every API process through the database (ADR 0009): each
counter here stands for one process."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.rate_limits import WINDOW_SECONDS, Policy
from clubwire.services.club_api import rate_limits
from clubwire.services.club_api.rate_limits import RateCounter
from clubwire.storage import database, rate_counts
from clubwire.storage.models import RateCount
from tests.logcapture import capturing

POLICY = Policy("per-key", 10)
START = 1_764_000_000.0  # the start of a window


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def _takes(counter: RateCounter, count: int, bucket: str = "key:a") -> list[bool]:
    """Whether each of ``count`` requests was let through."""
    return [not counter.take(POLICY, bucket).over for _ in range(count)]


def test_a_process_alone_lets_the_quota_through_and_refuses_the_rest(
    sessions: sessionmaker[Session],
) -> None:
    counter = RateCounter(sessions, Clock())
    assert _takes(counter, 12) == [True] * 10 + [False] * 2
    refused = counter.take(POLICY, "key:a")
    assert refused.over
    assert refused.headers()["Retry-After"] == str(WINDOW_SECONDS)
    assert not counter.take(POLICY, "key:b").over  # another key counts on its own


def test_processes_hold_one_quota_together_once_they_have_shared(
    sessions: sessionmaker[Session],
) -> None:
    clock = Clock()
    first, second = RateCounter(sessions, clock), RateCounter(sessions, clock)
    assert _takes(first, 6) == [True] * 6
    assert _takes(second, 1) == [True]
    asyncio.run(first.share())
    asyncio.run(second.share())  # learns the first's six: seven of ten used
    assert _takes(second, 4) == [True, True, True, False]
    asyncio.run(second.share())
    asyncio.run(first.share())
    assert _takes(first, 1) == [False]
    with sessions() as session:
        stored = session.execute(select(RateCount.bucket, RateCount.count)).all()
    assert stored == [("key:a", 10)]


def test_a_new_window_starts_afresh_and_old_windows_are_forgotten(
    sessions: sessionmaker[Session],
) -> None:
    clock = Clock()
    counter = RateCounter(sessions, clock)
    assert _takes(counter, 11)[-1] is False
    asyncio.run(counter.share())
    clock.now += WINDOW_SECONDS
    assert _takes(counter, 1) == [True]
    asyncio.run(counter.share())
    clock.now += WINDOW_SECONDS
    assert _takes(counter, 1, "key:b") == [True]
    asyncio.run(counter.share())
    with sessions() as session:
        windows = session.scalars(select(RateCount.window_number).order_by("window_number"))
        first = int(START) // WINDOW_SECONDS
        assert list(windows) == [first + 1, first + 2]  # the oldest is gone


def test_counts_that_could_not_be_shared_are_kept_for_the_next_time(
    sessions: sessionmaker[Session],
) -> None:
    clock = Clock()
    counter = RateCounter(sessions, clock)
    _takes(counter, 3)
    broken = RateCounter(sessionmaker(), clock)  # bound to nothing: every share fails
    broken.take(POLICY, "key:a")
    with pytest.raises(Exception, match="bind"):
        asyncio.run(broken.share())
    assert broken.look(POLICY, "key:a").used == 2  # its one count, kept, and this request
    asyncio.run(counter.share())
    with sessions() as session:
        assert session.scalar(select(RateCount.count)) == 3


def test_counts_being_shared_still_count_while_the_database_answers(
    sessions: sessionmaker[Session],
) -> None:
    """While a share waits on the database (here for a transaction holding the row it adds
    to), the requests it is sharing still count: the quota is not handed out again."""
    clock = Clock()
    counter = RateCounter(sessions, clock)
    assert _takes(counter, 10) == [True] * 10
    window = int(START) // WINDOW_SECONDS

    async def meanwhile() -> list[bool]:
        with sessions.begin() as holding:
            holding.add(RateCount(bucket="key:a", window_number=window, count=0))
            holding.flush()  # the row is held (PostgreSQL), the database (SQLite)
            sharing = asyncio.create_task(counter.share())
            await asyncio.sleep(0.2)  # the share is waiting in its thread
            assert not sharing.done()
            taken = _takes(counter, 2)
            holding.rollback()
        await sharing
        return taken

    assert asyncio.run(meanwhile()) == [False, False]
    with sessions() as session:
        assert session.scalar(select(RateCount.count)) == 10


def _unavailable() -> Exception:
    """What a share raises while the database cannot be reached (nothing listens there)."""
    nowhere = create_engine("postgresql+psycopg://postgres@127.0.0.1:9/none")
    counter = RateCounter(sessionmaker(nowhere), Clock())
    counter.take(POLICY, "key:a")
    with pytest.raises(Exception) as failed:  # noqa: PT011 (any error; checked below)
        asyncio.run(counter.share())
    assert database.unavailable(failed.value)
    return failed.value


def _told(monkeypatch: pytest.MonkeyPatch, shares: list[Exception | None]) -> list[dict[str, str]]:
    """What ``keep_sharing`` logs over ``shares``: each fails with its exception, or not."""
    monkeypatch.setattr(rate_limits, "SHARE_EVERY", 0)
    counter = RateCounter(sessionmaker(), Clock())
    outcomes = iter(shares)

    async def share() -> None:
        failure = next(outcomes, asyncio.CancelledError())  # all shared: stop sharing
        if failure is not None:
            raise failure

    monkeypatch.setattr(counter, "share", share)
    with capturing(monkeypatch, "info") as captured, pytest.raises(asyncio.CancelledError):
        asyncio.run(counter.keep_sharing())
    return [line for line in captured.lines() if line["logger"] == rate_limits.log.name]


def test_a_restart_of_the_database_goes_untold(monkeypatch: pytest.MonkeyPatch) -> None:
    down = _unavailable()
    assert _told(monkeypatch, [*[down] * (rate_limits.QUIET_FOR - 1), None]) == []


def test_an_outage_that_lasts_is_told_once_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    down = _unavailable()
    told = _told(monkeypatch, [*[down] * (rate_limits.QUIET_FOR + 3), None, down])
    assert [(line["level"], line["message"]) for line in told] == [
        ("warning", "sharing API request counts: the database is unavailable; counting alone"),
        ("info", "sharing API request counts again"),
    ]
    assert "error" not in told[0]  # no traceback


def test_a_fault_is_told_at_once_with_its_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    told = _told(monkeypatch, [ValueError("a bug"), ValueError("a bug"), None])
    assert [(line["level"], line["message"]) for line in told] == [
        ("error", "sharing API request counts failed; counting alone meanwhile"),
        ("info", "sharing API request counts again"),
    ]
    assert "ValueError: a bug" in told[0]["error"]


def test_thousands_of_buckets_are_added_in_statements_of_a_few_shapes(
    sessions: sessionmaker[Session],
) -> None:
    """A process counting for thousands of clubs a second: every total comes back right,
    and the statements that add them come in at most 7 sizes (``CHUNK`` and the powers of
    two below it), each compiled once, whatever the numbers of buckets."""
    first = [(f"club:{n}", 7, 1) for n in range(rate_counts.CHUNK * 2 + 37)]
    second = [(f"club:{n}", 7, 2) for n in range(0, len(first), 3)]
    with sessions.begin() as session:
        rate_counts.add(session.connection(), first)
    with sessions.begin() as session:
        totals = rate_counts.add(session.connection(), second)
    assert sorted(totals) == sorted((bucket, 7, 3) for bucket, _, _ in second)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(RateCount)) == len(first)
    with sessions.begin() as session:
        for count in range(1, rate_counts.CHUNK * 2):
            rate_counts.add(session.connection(), first[:count])
    assert rate_counts._adding.cache_info().currsize <= rate_counts.CHUNK.bit_length()
