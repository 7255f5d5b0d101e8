"""A short-lived process's notices go out before it exits (``storage.notices.FLUSH_AT_EXIT``):
``clubwire trigger`` publishes, commits and ends at once, and listening workers are still
woken, not left to their next look (issue 38 item 4)."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session, sessionmaker

from clubwire.settings import Settings
from clubwire.storage.queue import postgres
from tests.conftest import SECRET_KEY
from tests.factories import make_club, make_endpoint
from tests.functional import processes


def test_a_cli_publish_wakes_the_workers_before_the_process_ends(
    settings: Settings, sessions: sessionmaker[Session], tmp_path: Path
) -> None:
    if settings.is_sqlite:
        pytest.skip("NOTIFY is PostgreSQL's")
    with sessions.begin() as session:
        endpoint_id = make_endpoint(session, make_club(session, "granite"), settings)[0].id
    url = make_url(settings.sqlalchemy_url).set(drivername="postgresql")
    env = processes.environment(
        tmp_path, CLUBWIRE_DATABASE_URL=settings.database_url, CLUBWIRE_SECRET_KEY=SECRET_KEY
    )
    with psycopg.connect(url.render_as_string(hide_password=False), autocommit=True) as listener:
        listener.execute(f"LISTEN {postgres.CHANNEL}")
        with processes.clubwire(tmp_path, env, "trigger", "granite", "registration.created") as cli:
            assert cli.process.wait(60) == 0, cli.err
        (notice,) = list(listener.notifies(timeout=5, stop_after=1))
    assert notice.payload == endpoint_id
