"""docs/api.md's "Publishing events" is what the internal API and the command answer: the
batch shown is published with the answer shown (but for the ids), the problem shown is the
one answered word for word, and the command prints what is shown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session, sessionmaker

from clubwire.settings import Settings
from tests.conftest import PLATFORM_TOKEN
from tests.docs import markdown
from tests.factories import make_club, make_endpoint
from tests.functional.cli_runner import Invoke, ok, runner

AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
BATCH = "/internal/v1/clubs/granite/events/batch"
ID = re.compile(r"^evt_[A-Za-z0-9]+$")


def _section() -> str:
    text = (markdown.DOCS / "api.md").read_text(encoding="utf-8")
    return text.split("## Publishing events", 1)[1].split("\n## ", 1)[0]


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _section(), re.S)


@pytest.fixture
def granite(sessions: sessionmaker[Session], settings: Settings) -> None:
    with sessions.begin() as session:
        make_endpoint(session, make_club(session, "granite"), settings, kinds=("member.updated",))


def _without_ids(answer: dict[str, Any]) -> list[dict[str, Any]]:
    return [{name: v for name, v in event.items() if name != "id"} for event in answer["events"]]


def test_the_batch_shown_gets_the_answer_shown(client: TestClient, granite: None) -> None:
    sent, shown, _ = (json.loads(block) for block in _blocks("json"))
    answer = client.post(BATCH, json=sent, headers=AUTH)
    assert answer.status_code == 201, answer.text
    assert all(ID.match(event["id"]) for event in answer.json()["events"])
    assert _without_ids(answer.json()) == _without_ids(shown)
    again = client.post(BATCH, json=sent, headers=AUTH)
    assert again.status_code == 200
    assert [event["repeated"] for event in again.json()["events"]] == [True, True]


def test_the_problem_shown_is_the_one_answered(client: TestClient, granite: None) -> None:
    sent, _, problem = (json.loads(block) for block in _blocks("json"))
    del sent["events"][1]["data"]["member"]
    answer = client.post(BATCH, json=sent, headers=AUTH)
    assert (answer.status_code, answer.json()) == (422, problem)


def test_the_command_prints_what_is_shown(
    database_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    granite: None,
) -> None:
    run: Invoke = runner(database_url, tmp_path, monkeypatch, capsys)
    sent = json.loads(_blocks("json")[0])
    (tmp_path / "events.json").write_text(json.dumps(sent["events"]))
    (console,) = _blocks("console")
    command, *printed = console.strip().splitlines()
    args = command.removeprefix("$ clubwire ").split()
    ids = ok(run(*args)).out.split()
    assert len(ids) == len(printed) == len(sent["events"])
    assert all(ID.match(event_id) for event_id in ids)
