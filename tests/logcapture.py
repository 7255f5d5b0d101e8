"""Capturing clubwire's JSON log lines in a test, as ``logs.configure`` makes them."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TextIO

import orjson
import pytest

from clubwire import logs


class Captured(io.StringIO):
    def lines(self) -> list[dict[str, Any]]:
        return [orjson.loads(line) for line in self.getvalue().splitlines()]

    def events(self, name: str) -> list[dict[str, Any]]:
        return [line for line in self.lines() if line.get("event") == name]


@contextmanager
def capturing(
    monkeypatch: pytest.MonkeyPatch, level: logs.Level = "debug", stream: TextIO | None = None
) -> Iterator[Captured]:
    """Every log line of the process, JSON as in production, until the block ends (into
    ``stream`` if given, else into the ``Captured`` yielded)."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(logs, "_destination", logs._Destination())
    was = root.level
    captured = Captured()
    logs.configure(level, stream or captured)
    try:
        yield captured
    finally:
        root.setLevel(was)
