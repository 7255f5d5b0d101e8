"""A PostgreSQL cluster of a test's own, which the test may stop and start again.

The shared server on port 5432 runs every other test at the same time and is never stopped.
A test that needs the database to go away gets its own cluster: ``initdb`` in a temporary
folder, a free port, ``pg_ctl`` to start and stop it, and one database, ``clubwire``, migrated.
PostgreSQL refuses to run as root, so as root the cluster runs as the ``postgres`` user.
Without the PostgreSQL binaries the test is skipped with the reason, unless
``CLUBWIRE_REQUIRE_POSTGRES=1``, which makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from clubwire.storage import database, migrate
from tests import conftest
from tests.ports import free_port

INSTALLS = Path("/usr/lib/postgresql")
DATABASE = "clubwire"
USER = "postgres"  # the cluster's superuser, and the system user that runs it as root


class Cluster:
    """One stopped-or-running PostgreSQL cluster on 127.0.0.1:``port``, trust authentication."""

    def __init__(self, binaries: Path, folder: Path, port: int) -> None:
        self.port = port
        self._binaries = binaries
        self._folder = folder
        self._data = folder / "data"

    def url(self, name: str = DATABASE) -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    def create(self) -> None:
        self._run("initdb", "-D", str(self._data), "-U", USER, "--auth=trust", "--no-sync")

    def start(self) -> None:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self._folder} -c fsync=off"
        log = str(self._folder / "postgres.log")
        self._run("pg_ctl", "-D", str(self._data), "-l", log, "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server: ``fast`` ends every session, as an operator's restart does."""
        self._run("pg_ctl", "-D", str(self._data), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self._data / "postmaster.pid").exists()

    def _run(self, program: str, *args: str) -> None:
        command = [str(self._binaries / program), *args]
        if os.geteuid() == 0:
            command = ["runuser", "-u", USER, "--", *command]
        subprocess.run(command, cwd=self._folder, check=True, capture_output=True, timeout=60)


@contextmanager
def private_cluster() -> Iterator[Cluster]:
    """A running cluster with the database ``clubwire`` migrated; stopped and removed at the
    end, whatever happens in between."""
    binaries = _binaries()
    folder = Path(tempfile.mkdtemp(prefix="clubwire-postgres-"))
    try:
        if os.geteuid() == 0:
            shutil.chown(folder, USER, USER)
        cluster = Cluster(binaries, folder, free_port())
        cluster.create()
        cluster.start()
        try:
            _migrated(cluster)
            yield cluster
        finally:
            if cluster.running():
                cluster.stop("immediate")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _binaries() -> Path:
    """The newest installed PostgreSQL's ``bin`` folder; else skip (or fail) saying so."""
    found = sorted(
        (path for path in INSTALLS.glob("*/bin") if (path / "pg_ctl").exists()),
        key=lambda path: int(path.parent.name) if path.parent.name.isdigit() else 0,
    )
    if found:
        return found[-1]
    reason = f"no PostgreSQL binaries (initdb, pg_ctl) under {INSTALLS}"
    if conftest.REQUIRE_POSTGRES:
        pytest.fail(f"{reason} (CLUBWIRE_REQUIRE_POSTGRES=1)")
    pytest.skip(reason)


def _migrated(cluster: Cluster) -> None:
    with psycopg.connect(cluster.url("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{DATABASE}"')
    engine = database.engine_for(conftest.make_settings(cluster.url(), Path(".")))
    try:
        migrate.upgrade(engine)
    finally:
        engine.dispose()
