"""Fixtures of the unit tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture
def isolated_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Settings read as a fresh process would: no ``CLUBWIRE_*`` variable and no ``.env``
    from the machine running the tests."""
    for name in list(os.environ):
        if name.upper().startswith("CLUBWIRE_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
