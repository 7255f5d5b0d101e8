"""Text the database cannot hold given to the ``clubwire`` command: in an input file (a JSON
escape), in an argument (bytes that are not UTF-8, which Python hands over as lone
surrogates), on standard input. One readable line, a non-zero exit, nothing written; the same
input without the bad character works."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import program_data
from tests.functional.cli_runner import Invoke, ok, one_line_error
from tests.functional.unstorable import (
    BAD,
    MARK,
    NUL,
    REFUSED,
    SURROGATE,
    json_with,
    member_update,
    rows,
)

PASSWORD = "correct horse battery staple"


@pytest.fixture
def granite(run: Invoke) -> None:
    ok(run("club", "create", "granite", "--name", "Granite CC"))
    ok(run("club", "module", "granite", "on"))


def _refused_in_a_file(line: str, bad: str, field: str) -> None:
    """NUL is refused by the field's own check; a lone surrogate's escape by orjson, which
    reads it as not JSON at all."""
    if bad == NUL:
        assert line.endswith(f"{field} {REFUSED[NUL]}"), line
    else:
        assert "is not JSON: invalid high surrogate in string" in line, line


@pytest.mark.parametrize("bad", BAD)
def test_program_import_refuses_a_file_holding_it(
    run: Invoke, sessions: sessionmaker[Session], granite: None, tmp_path: Path, bad: str
) -> None:
    programs = [{"id": "tue-league", **program_data(name=f"Tuesday {MARK}League")}]
    file = tmp_path / "programs.json"
    file.write_bytes(json_with(programs, bad))
    before = rows(sessions)
    line = one_line_error(run("program", "import", "granite", str(file)))
    _refused_in_a_file(line, bad, "program 1: name: Value error,")
    assert rows(sessions) == before
    file.write_text(json.dumps([{"id": "tue-league", **program_data()}]))
    assert "1 created" in ok(run("program", "import", "granite", str(file))).out


@pytest.mark.parametrize("bad", BAD)
def test_event_publish_refuses_data_holding_it(
    run: Invoke, sessions: sessionmaker[Session], granite: None, bad: str
) -> None:
    publish = ("event", "publish", "granite", "member.updated", "--data", "-")
    before = rows(sessions)
    published = run(*publish, stdin=json_with(member_update(f"Ann {MARK}Lee"), bad))
    _refused_in_a_file(one_line_error(published), bad, "data.member.name:")
    assert rows(sessions) == before
    good = json.dumps(member_update("Ann Lee")).encode()
    assert ok(run(*publish, stdin=good)).out.startswith("evt_")


@pytest.mark.parametrize(
    "args",
    [
        ("club", "create", "marble", "--name", f"Marble{SURROGATE}"),
        ("club", "create", f"marble{SURROGATE}", "--name", "Marble"),
        ("key", "create", "granite", "--scope", "read:programs", "--name", f"Web{SURROGATE}"),
        ("key", "revoke", "granite", f"abc{SURROGATE}"),
        ("user", "create", f"ann{SURROGATE}@granite.example", "--password-stdin"),
        (
            "event",
            "publish",
            "granite",
            "member.updated",
            "--data",
            "-",
            "--idempotency-key",
            f"k{SURROGATE}",
        ),
        ("endpoint", "create", "granite", f"https://hooks.example/{SURROGATE}"),
        ("endpoint", "disable", f"we_{SURROGATE}"),
        ("delivery", "show", f"dlv_{SURROGATE}"),
    ],
)
def test_an_argument_that_is_not_utf8_is_refused_before_anything_runs(
    run: Invoke, sessions: sessionmaker[Session], granite: None, args: tuple[str, ...]
) -> None:
    before = rows(sessions)
    line = one_line_error(run(*args, stdin=f"{PASSWORD}\n".encode()))
    shown = next(arg for arg in args if SURROGATE in arg).replace(SURROGATE, "\\xff")
    assert line == f'clubwire: error: the argument "{shown}" {REFUSED[SURROGATE]}'
    assert rows(sessions) == before
    fixed = run(*(arg.replace(SURROGATE, "") for arg in args), stdin=f"{PASSWORD}\n".encode())
    assert "Unicode" not in fixed.err


@pytest.mark.parametrize(
    "stdin",
    [f"correct horse{NUL}battery\n".encode(), b"correct horse \xff battery\n"],
    ids=["nul", "not utf-8"],
)
def test_a_password_on_stdin_is_refused_when_it_could_not_be_typed_again(
    run: Invoke, sessions: sessionmaker[Session], stdin: bytes
) -> None:
    before = rows(sessions)
    line = one_line_error(
        run("user", "create", "ann@granite.example", "--password-stdin", stdin=stdin)
    )
    assert line.startswith("clubwire: error: the password must")
    assert rows(sessions) == before
    ok(
        run(
            "user",
            "create",
            "ann@granite.example",
            "--password-stdin",
            stdin=f"{PASSWORD}\n".encode(),
        )
    )
