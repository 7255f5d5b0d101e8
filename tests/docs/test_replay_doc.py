"""docs/operations.md's replay examples are what the server does: its request body, sent to
the internal API, gets the answer shown; its command lines print what is shown."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from clubwire.settings import Settings
from tests.conftest import PLATFORM_TOKEN
from tests.docs import markdown
from tests.factories import EPOCH, make_club, make_endpoint
from tests.functional.cli_runner import Invoke, ok, runner
from tests.replaying import make_delivery

DOC = markdown.DOCS / "operations.md"
SECTION = "## Replaying deliveries"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split(SECTION, 1)[1].split("\n## ", 1)[0]


def _json_blocks() -> list[object]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", _section(), re.S)]


def _console() -> list[tuple[list[str], str]]:
    """Each command of the console block (after ``clubwire``) and the line it prints."""
    block = re.search(r"```console\n(.*?)```", _section(), re.S)
    assert block is not None
    lines = block[1].splitlines()
    return [(lines[i].split()[2:], lines[i + 1]) for i in range(0, len(lines), 2)]


@pytest.fixture
def endpoint_id(session: Session, settings: Settings) -> str:
    """Granite's endpoint, with three dead ``registration.created`` deliveries in the window."""
    club = make_club(session, "granite")
    endpoint, _ = make_endpoint(session, club, settings)
    for minutes in (5, 20, 59):
        make_delivery(session, club, endpoint, EPOCH + timedelta(minutes=minutes))
    make_delivery(session, club, endpoint, EPOCH + timedelta(hours=1))
    session.commit()
    return endpoint.id


def test_the_request_gets_the_answer_shown(client: TestClient, endpoint_id: str) -> None:
    body, answer = _json_blocks()
    url = f"/internal/v1/clubs/granite/endpoints/{endpoint_id}/replays"
    got = client.post(url, json=body, headers={"Authorization": f"Bearer {PLATFORM_TOKEN}"})
    assert got.status_code == 200, got.text
    assert got.json() == answer


def test_the_commands_print_what_is_shown(
    database_url: str,
    endpoint_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run: Invoke = runner(database_url, tmp_path, monkeypatch, capsys)
    for args, printed in _console():
        given = [endpoint_id if arg == "we_…" else arg for arg in args]
        assert ok(run(*given)).out == f"{printed}\n"
