"""Running the ``clubwire`` command in-process, as a test sees it."""

from __future__ import annotations

import io
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from clubwire import cli
from tests.conftest import SECRET_KEY


@dataclass(frozen=True)
class Result:
    code: int
    out: str
    err: str


class Invoke(Protocol):
    def __call__(self, *args: str, stdin: bytes | None = None) -> Result: ...


def runner(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Invoke:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CLUBWIRE_DATABASE_URL", database_url)
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", SECRET_KEY)
    monkeypatch.setenv("CLUBWIRE_HOME", str(tmp_path / "home"))

    def invoke(*args: str, stdin: bytes | None = None) -> Result:
        if stdin is not None:
            monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
        try:
            cli.main(list(args))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return invoke


def ok(result: Result) -> Result:
    assert result.code == 0, result.err
    return result


def one_line_error(result: Result, code: int = 1) -> str:
    assert result.code == code
    assert result.out == ""
    lines = result.err.strip().splitlines()
    assert len(lines) == 1, result.err
    assert lines[0].startswith("clubwire: error: ")
    return lines[0]
