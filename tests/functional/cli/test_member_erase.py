"""``clubwire member erase``: an operator erases a member from the command line; bad input is
one readable line and a non-zero exit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.factories import about
from tests.functional.cli_runner import Invoke, ok, one_line_error

EMAIL = "ada.unique@example.org"


@pytest.fixture
def club(run: Invoke, tmp_path: Path) -> str:
    ok(run("club", "create", "granite", "--name", "Granite"))
    for seed, kind in enumerate(("registration.created", "member.updated")):
        data = about(kind, seed, id="mbr_ada", name="Ada", email=EMAIL)
        path = tmp_path / f"{kind}.json"
        path.write_text(json.dumps(data))
        ok(run("event", "publish", "granite", kind, "--data", str(path)))
    return "granite"


def test_a_dry_run_counts_and_the_erasure_then_does_it(run: Invoke, club: str) -> None:
    dry = json.loads(ok(run("member", "erase", club, "--email", EMAIL, "--dry-run", "--json")).out)
    said = ok(run("member", "erase", club, "--member-id", "mbr_ada")).out
    again = json.loads(ok(run("member", "erase", club, "--email", EMAIL, "--json")).out)

    assert (dry["id"], dry["dryRun"], dry["counts"]["events"]) == (None, True, 2)
    assert said.startswith("Erased (era_")
    assert "2 events" in said
    assert again["requestedBy"] == "operator"
    assert again["counts"]["events"] == 0
    assert EMAIL not in said


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        ((), "give an email, a member id"),
        (("--email", "not an email"), "the email: value is not a valid email address"),
        (("--member-id", "mbr ada"), "the member id"),
    ],
)
def test_bad_input_is_one_line(run: Invoke, club: str, args: tuple[str, ...], needle: str) -> None:
    assert needle in one_line_error(run("member", "erase", club, *args))


def test_an_unknown_club_is_one_line(run: Invoke) -> None:
    assert "no club 'nowhere'" in one_line_error(
        run("member", "erase", "nowhere", "--email", EMAIL)
    )
