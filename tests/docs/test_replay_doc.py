"""docs/operations.md's replay examples are what the server does: its request body, sent to
the internal API, gets the answer shown; its command lines print what is shown."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from clubwire.services import clubs
from clubwire.settings import Settings
from clubwire.storage.models import Endpoint
from tests.conftest import PLATFORM_TOKEN
from tests.docs import markdown
from tests.factories import EPOCH, make_club, make_delivery, make_endpoint
from tests.functional.cli_runner import Invoke, ok, runner

DOC = markdown.DOCS / "operations.md"
AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}
SECTION = "## Replaying deliveries"


def _section() -> str:
    return markdown.section(DOC, SECTION)


def _json_blocks() -> list[object]:
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", _section(), re.S)]


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
    got = client.post(_url(endpoint_id), json=body, headers=AUTH)
    assert got.status_code == 200, got.text
    assert got.json() == answer


def _times() -> dict[str, str]:
    """What the section's paragraph on times states, by name: an offset window and the UTC
    hour it is said to cover, a time with zero seconds and one with other seconds."""
    paragraph = " ".join(_section().split("**Times**", 1)[1].split("\n\n", 1)[0].split())
    patterns = [
        r"\(`(?P<since>[^`]+)` is (?P<start>\d\d:\d\d) UTC: from it to `(?P<until>[^`]+)` is the"
        r" hour from (?P=start) to (?P<end>\d\d:\d\d) UTC\)",
        r"only as zero \(`(?P<zero>[^`]+)`\)",
        r"other seconds \(`(?P<other>[^`]+)`\), or not in this form, is `422`",
    ]
    found: dict[str, str] = {}
    for pattern in patterns:
        match = re.search(pattern, paragraph)
        assert match is not None, pattern
        found |= match.groupdict()
    return found


def _utc(hour: str) -> datetime:
    return datetime.fromisoformat(f"{EPOCH.date()}T{hour}Z")


def test_an_offset_window_covers_the_utc_hour_stated(
    client: TestClient, session: Session, endpoint_id: str
) -> None:
    """Deliveries at 12:05, 12:20, 12:59 and 13:00 UTC (``endpoint_id``), and three more here,
    at the stated hour's first and last minute and the minute before it."""
    stated = _times()
    start, end = _utc(stated["start"]), _utc(stated["end"])
    assert (start, end) == (EPOCH - timedelta(hours=1), EPOCH)  # the hour before the example
    club = clubs.get_club(session, "granite")
    endpoint = session.get_one(Endpoint, endpoint_id)
    for created in (start - timedelta(minutes=1), start, end - timedelta(minutes=1)):
        make_delivery(session, club, endpoint, created)
    session.commit()
    body = {"since": stated["since"], "until": stated["until"], "dryRun": True}
    got = client.post(_url(endpoint_id), json=body, headers=AUTH)
    assert got.status_code == 200, got.text
    assert got.json()["matching"] == 2  # 11:00 and 11:59, in UTC


@pytest.mark.parametrize(("time", "status"), [("zero", 200), ("other", 422)])
def test_seconds_are_accepted_only_as_zero_as_stated(
    client: TestClient, endpoint_id: str, time: str, status: int
) -> None:
    body = {"since": _times()[time], "until": "2026-01-05T13:00Z", "dryRun": True}
    got = client.post(_url(endpoint_id), json=body, headers=AUTH)
    assert got.status_code == status, got.text
    if status == 422:
        assert got.json()["code"] == "invalid_input"
        assert got.json()["detail"].startswith("since must be a time to the minute")


def _url(endpoint_id: str) -> str:
    return f"/internal/v1/clubs/granite/endpoints/{endpoint_id}/replays"


def test_the_commands_print_what_is_shown(
    database_url: str,
    endpoint_id: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    run: Invoke = runner(database_url, tmp_path, monkeypatch, capsys)
    for args, printed in markdown.console_steps(_section()):
        given = [endpoint_id if arg == "we_…" else arg for arg in args]
        assert ok(run(*given)).out == f"{printed}\n"
