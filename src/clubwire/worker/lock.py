"""On SQLite exactly one worker runs: it holds an exclusive lock on a file beside the database."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy.engine import make_url

from clubwire import errors
from clubwire.settings import Settings


@contextmanager
def single_worker(settings: Settings) -> Iterator[None]:
    """Hold the SQLite worker lock for the duration (no-op on PostgreSQL); the operating system
    releases it if the process dies."""
    if not settings.is_sqlite:
        yield
        return
    database = make_url(settings.sqlalchemy_url).database or "clubwire.db"
    path = Path(f"{database}.worker-lock")
    path.parent.mkdir(parents=True, exist_ok=True)  # `worker` may be the first command run
    with path.open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise errors.AlreadyRunning() from None
        yield
