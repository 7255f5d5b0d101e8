"""docs/operations.md's section on keeping payloads for fewer days is what the service does:
its command lines print what is shown, and its request body sets the days through the
internal API."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.conftest import PLATFORM_TOKEN
from tests.docs import markdown
from tests.factories import make_club
from tests.functional.cli_runner import Invoke, ok, runner

DOC = markdown.DOCS / "operations.md"
AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
SECTION = "### Keeping payloads for fewer days"


def _section() -> str:
    return markdown.section(DOC, SECTION)


def test_the_commands_print_what_is_shown(
    database_url: str,
    session: Session,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    make_club(session, "granite")
    session.commit()
    run: Invoke = runner(database_url, tmp_path, monkeypatch, capsys)
    for args, printed in markdown.console_steps(_section()):
        assert ok(run(*args)).out == f"{printed}\n"


def test_the_request_sets_the_days(client: TestClient) -> None:
    (block,) = re.findall(r"```json\n(.*?)```", _section(), re.S)
    body = json.loads(block)
    got = client.put("/internal/v1/clubs/granite", json=body, headers=AUTH)
    assert got.status_code == 201, got.text
    assert got.json()["payloadDays"] == body["payloadDays"] == 7
    limits = re.search(r"Days below 1 or above `CLUBWIRE_RETENTION_DAYS`", _section())
    assert limits is not None
    refused = client.put(
        "/internal/v1/clubs/granite", json={**body, "payloadDays": 31}, headers=AUTH
    )
    assert refused.status_code == 422
    assert refused.json()["code"] == "invalid_input"
