"""Fixtures for the functional tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import private_postgres
from tests.functional.cli_runner import Invoke, runner
from tests.receiver import Authority, Receiver, authority, serving


@pytest.fixture
def run(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Invoke:
    """Run ``clubwire …`` in this process against the test database."""
    return runner(database_url, tmp_path, monkeypatch, capsys)


@pytest.fixture
def own_postgres() -> Iterator[private_postgres.Cluster]:
    """A PostgreSQL cluster of this test's own (never the shared one), migrated, which the
    test may stop and start; stopped at the end whatever happens."""
    with private_postgres.private_cluster() as cluster:
        yield cluster


@pytest.fixture
def tls(tmp_path: Path) -> Authority:
    """A CA of the test's own, which a receiver's certificate comes from."""
    return authority(tmp_path)


@pytest.fixture
def receiver(tls: Authority) -> Iterator[Receiver]:
    """A TLS webhook receiver on 127.0.0.1 for the test's length."""
    with serving(tls) as receiver:
        yield receiver
