"""On PostgreSQL each API process keeps the key rows it read (ADR 0010): a revocation made
anywhere is refused by every process from its first request after the notice arrives."""

from __future__ import annotations

import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from clubwire.services.club_api import keys
from clubwire.settings import Settings
from tests.factories import EPOCH, make_club, make_key
from tests.functional import processes

REFUSED_WITHIN = 1.0  # seconds; measured about 2-5 ms on PostgreSQL (ADR 0010)


def test_a_revocation_is_refused_by_another_process_at_once(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    if settings.is_sqlite:
        pytest.skip("PostgreSQL's notices between processes")
    with sessions.begin() as session:
        record, key = make_key(session, make_club(session, "granite"))
    with ExitStack() as stack:
        (url,) = processes.servers(stack, settings, tmp_path, 1)
        assert [processes.fetch(url, key) for _ in range(20)] == [200] * 20  # kept by now
        with sessions.begin() as session:
            granite = clubs.get_club(session, "granite")
            keys.revoke_key(session, granite.id, record.prefix, EPOCH)
        revoked = time.monotonic()
        while processes.fetch(url, key) == 200:
            assert time.monotonic() - revoked < REFUSED_WITHIN
        assert processes.fetch(url, key) == 401
