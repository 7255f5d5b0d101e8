"""Fixtures for the functional tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.functional.cli_runner import Invoke, runner


@pytest.fixture
def run(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Invoke:
    """Run ``clubwire …`` in this process against the test database."""
    return runner(database_url, tmp_path, monkeypatch, capsys)
