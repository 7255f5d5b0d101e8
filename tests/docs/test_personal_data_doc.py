"""docs/operations.md's "Personal data" is what clubwire does: its commands print what is
shown, the record shown has the fields the API answers, the tables it names exist, and the
proof it gives finds the member before an erasure and not after."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import inspect
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services.delivery import claims, events, records
from clubwire.settings import Settings
from tests.conftest import PLATFORM_TOKEN
from tests.docs import markdown
from tests.docs.conftest import base_env
from tests.factories import EPOCH, about, answered, claim_jobs, make_club, make_endpoint
from tests.functional.cli_runner import Invoke, ok, runner

DOC = markdown.DOCS / "operations.md"
SECTION = "## Personal data"
KINDS = ("registration.created", "member.updated", "practice_ice.booked")
LEASE = timedelta(seconds=60)
AUTH = {"Authorization": f"Bearer {PLATFORM_TOKEN}"}


def _section(heading: str = SECTION) -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split(heading, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


def _blocks(heading: str, lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", _section(heading), re.S)


@pytest.fixture
def ada(sessions: sessionmaker[Session], settings: Settings) -> None:
    """Three events of Ada's to granite's endpoint: two answered with an echo, one waiting."""
    with sessions.begin() as session:
        club = make_club(session, "granite")
        make_endpoint(session, club, settings, kinds=KINDS)
        for seed, kind in enumerate(KINDS):
            data = about(kind, seed, id="mbr_ada", name="Ada Lovelace", email="ada@example.org")
            events.publish(session, club, kind, data, EPOCH)
    with sessions.begin() as session:
        jobs = claim_jobs(session, "wkr_doc", lanes=1, per_lane=2)
        echoed = [answered(job, 200, job.body.decode()) for job in jobs]
        records.record(session, echoed, EPOCH)
        claims.give_back(session, [job.endpoint_id for job in jobs[:1]], "wkr_doc", EPOCH)


@pytest.fixture
def run(
    database_url: str,
    ada: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> Invoke:
    """``clubwire …`` against the test database, where Ada has her events."""
    return runner(database_url, tmp_path, monkeypatch, capsys)


def test_the_commands_print_what_is_shown(run: Invoke) -> None:
    (block,) = _blocks("### Erasing a member", "console")
    lines = block.splitlines()
    for command, printed in zip(lines[::2], lines[1::2], strict=True):
        out = ok(run(*command.split()[2:])).out
        shown = re.escape(printed).replace("…", "[A-Za-z0-9]+")
        assert re.fullmatch(f"{shown}\n", out), out


def test_the_record_shown_has_the_fields_the_answer_has(run: Invoke) -> None:
    (block,) = _blocks("### Erasing a member", "json")
    shown = json.loads(block)

    answered = json.loads(
        ok(
            run(
                "member",
                "erase",
                "granite",
                "--email",
                "ada@example.org",
                "--member-id",
                "mbr_ada",
                "--json",
            )
        ).out
    )

    assert answered.keys() == shown.keys()
    assert answered["counts"] == shown["counts"]
    assert (answered["club"], answered["matchedBy"], answered["dryRun"]) == (
        shown["club"],
        shown["matchedBy"],
        shown["dryRun"],
    )


def test_every_table_named_exists(sessions: sessionmaker[Session]) -> None:
    named = set(re.findall(r"^\| `([a-z_]+)(?:\.[a-z_]+)?`", _section(), re.M))
    with sessions() as session:
        tables = set(inspect(session.connection()).get_table_names())
    assert named
    assert named <= tables


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
def test_the_proof_finds_the_member_before_the_erasure_and_not_after(
    database_url: str, run: Invoke
) -> None:
    (block,) = _blocks("### Proving it", "console")
    command, printed = block.splitlines()
    env = {**base_env(), "CLUBWIRE_DATABASE_URL": database_url}

    def proof() -> str:
        found = subprocess.run(
            ["bash", "-c", command.removeprefix("$ ")],
            check=False,  # grep -c exits 1 when it counts 0
            env=env,
            capture_output=True,
            text=True,
        )
        return found.stdout.strip()

    assert int(proof()) > 0
    ok(run("member", "erase", "granite", "--email", "ada@example.org"))
    assert proof() == printed


def test_the_api_request_shown_gets_the_record_shown(client: TestClient, ada: None) -> None:
    text = (markdown.DOCS / "api.md").read_text(encoding="utf-8")
    section = text.split("## Erasing a member", 1)[1]
    asked, shown = (json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.S))

    answer = client.post("/internal/v1/clubs/granite/erasures", json=asked, headers=AUTH)

    assert answer.status_code == 201
    record = answer.json()
    assert record.keys() == shown.keys()
    assert record["counts"] == shown["counts"]
    assert record["matchedBy"] == shown["matchedBy"]
