"""``clubwire demo`` as a new user runs it: a real process, its printed instructions followed."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import time
from collections import Counter
from contextlib import AbstractContextManager
from pathlib import Path

import httpx2
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from clubwire import receiving, signing
from clubwire.domain import event_catalog
from clubwire.storage import database
from clubwire.storage.models import ApiKey, Club, Delivery, Endpoint, Program, User
from tests.conftest import make_settings
from tests.docs.conftest import require
from tests.functional import ui_pages
from tests.functional.cli_runner import one_line_error, runner
from tests.functional.processes import Clubwire, clubwire, environment, wait_for
from tests.ports import free_port

READY = "Ctrl-C stops."
VERIFIED = re.compile(r"^receiver ✓ (\S+) (evt_\w+) (dlv_\w+) verified \((\d+)", re.MULTILINE)


def _demo(tmp_path: Path, port: int) -> AbstractContextManager[Clubwire]:
    env = environment(tmp_path / "home", CLUBWIRE_RETRY_SCHEDULE="1,1,1,1,1")
    return clubwire(tmp_path, env, "demo", "--port", str(port), "--interval", "0.1")


def _arrivals(out: str) -> list[tuple[str, str, str, int]]:
    return [(kind, evt, dlv, int(code)) for kind, evt, dlv, code in VERIFIED.findall(out)]


def _retried(out: str) -> bool:
    """A delivery answered 503 arrived again."""
    arrivals = _arrivals(out)
    failed = {dlv for _, _, dlv, code in arrivals if code == 503}
    return any(count > 1 for dlv, count in Counter(a[2] for a in arrivals).items() if dlv in failed)


def _sign_in(base_url: str, email: str, password: str, page: str) -> str:
    with httpx2.Client(base_url=base_url, follow_redirects=False) as client:
        token = ui_pages.csrf_token(client.get("/sign-in").text)
        form = {"email": email, "password": password, "next": page, "csrf_token": token}
        signed_in = client.post("/sign-in", data=form)
        assert signed_in.status_code == 303, signed_in.text
        shown = client.get(page)
        assert shown.status_code == 200
        return shown.text


def _stop(demo_process: Clubwire) -> str:
    assert demo_process.interrupt() == 0, demo_process.err
    assert "Traceback" not in demo_process.err
    out = demo_process.out
    assert out.rstrip().endswith("clubwire demo: stopped.")
    return out


def _counts(home: Path) -> dict[str, object]:
    engine = database.engine_for(make_settings(f"sqlite:///{home / 'clubwire.db'}", home))
    try:
        with Session(engine) as session:
            count = {
                name: session.scalar(select(func.count()).select_from(model))
                for name, model in [
                    ("clubs", Club),
                    ("programs", Program),
                    ("users", User),
                    ("endpoints", Endpoint),
                ]
            }
            active = select(func.count()).where(ApiKey.revoked_at.is_(None))
            return {
                **count,
                "active keys": session.scalar(active),
                "deliveries": set(session.scalars(select(Delivery.id))),
                "urls": list(session.scalars(select(Endpoint.url))),
            }
    finally:
        engine.dispose()


def _verify_kept(kept: Path, secret: str) -> None:
    """The kept delivery verifies with the printed secret. Each file is replaced whole, but
    the demo goes on delivering: a read may fall between the body's replacement and the
    signature's, so a pair that does not match is read again."""
    for _ in range(50):
        signature = (kept / receiving.SIGNATURE_FILE).read_text().strip()
        try:
            signing.verify((kept / receiving.BODY_FILE).read_bytes(), signature, secret)
        except signing.SignatureMismatchError:
            time.sleep(0.05)
        else:
            return
    raise AssertionError(f"the delivery kept in {kept} never verified with the printed secret")


@pytest.mark.slow
def test_the_demo_does_what_it_prints_and_keeps_its_data(tmp_path: Path) -> None:
    port = free_port()
    with _demo(tmp_path, port) as first:
        out = first.until(lambda out: READY in out, "banner")
        settings_url = re.search(r"Settings page: (\S+)", out)
        curl = re.search(r"curl -s -H 'Authorization: Bearer (\S+)' (\S+)", out)
        sign_ins = re.findall(r"(superadmin|club admin)\s+(\S+@\S+)\s+password (\S+)", out)
        assert settings_url, out
        assert curl, out
        assert [role for role, _, _ in sign_ins] == ["superadmin", "club admin"]

        programs = json.loads(wait_for(curl[2], {"Authorization": f"Bearer {curl[1]}"}))
        names = {program["name"] for program in programs["data"]}
        assert "Tuesday Night League" in names
        assert not names & {"Board Strategy Retreat", "Spring Fling Bonspiel"}

        out = first.until(lambda out: len(_arrivals(out)) >= 5, "verified deliveries")
        assert {kind for kind, *_ in _arrivals(out)} <= set(event_catalog.SUBSCRIBABLE)
        check = re.search(r"WEBHOOK_SECRET=(whsec_\w+) node \S+/check-delivery\.mjs (\S+)", out)
        assert check, out
        _verify_kept(Path(check[2]), check[1])
        first.until(_retried, "a retried delivery", timeout=30)

        base_url = f"http://127.0.0.1:{port}"
        (_, admin, admin_password), (_, manager, manager_password) = sign_ins
        assert "Granite Curling Club" in _sign_in(base_url, admin, admin_password, "/admin")
        page = _sign_in(base_url, manager, manager_password, settings_url[1].removeprefix(base_url))
        assert "Recent deliveries" in page
        out = _stop(first)
    assert curl[1] not in first.err
    before = _counts(tmp_path / "home")

    with _demo(tmp_path, port) as second:
        out = second.until(lambda out: READY in out and _arrivals(out), "a verified delivery")
        receiver_url = re.search(r"receiver at (\S+)\.\n", out)
        _stop(second)
    after = _counts(tmp_path / "home")
    assert receiver_url
    assert after["urls"] == [receiver_url[1]]
    assert before["deliveries"] < after["deliveries"]  # type: ignore[operator]
    expected = {"clubs": 1, "programs": 15, "users": 2, "endpoints": 1, "active keys": 1}
    assert {name: after[name] for name in expected} == expected


@pytest.mark.slow
def test_the_printed_node_command_runs_as_printed_in_a_fresh_folder(tmp_path: Path) -> None:
    """As on a fresh clone: the default home (.clubwire, in the folder the demo runs in) and
    nothing but ``node``; the command is given to a shell as printed, from that folder."""
    require("node")
    env = environment(tmp_path / "unused")
    del env["CLUBWIRE_HOME"]
    with clubwire(tmp_path, env, "demo", "--port", str(free_port()), "--interval", "0.1") as run:
        out = run.until(lambda out: READY in out and _arrivals(out), "a verified delivery")
        (command,) = re.findall(r"^  (WEBHOOK_SECRET=\S+ node .*)$", out, re.MULTILINE)
        assert command.split()[2:] == [
            ".clubwire/demo/check-delivery.mjs",
            ".clubwire/demo/last-delivery",
        ]
        checked = _run_until_verified(command, tmp_path, env)
        _stop(run)
    assert re.fullmatch(r"verified \S+ evt_\w+, signed at \S+Z\n", checked), checked


def _run_until_verified(command: str, folder: Path, env: dict[str, str]) -> str:
    """The command's output once it succeeds; the demo goes on delivering, so a check that
    read a body and a signature of two deliveries (see ``_verify_kept``) is run again."""
    for _ in range(50):
        done = subprocess.run(
            ["bash", "-c", command],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        if done.returncode == 0:
            return done.stdout
        assert "no v1 signature matches" in done.stderr, done.stderr
        time.sleep(0.05)
    raise AssertionError(f"{command!r} never verified the kept delivery:\n{done.stderr}")


def test_the_demo_runs_on_sqlite_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    run = runner("postgresql://nobody@127.0.0.1:1/none", tmp_path, monkeypatch, capsys)
    assert "embedded SQLite" in one_line_error(run("demo"))


REPLAY = re.compile(r"^  (\S+ (?:-m clubwire )?delivery replay .* --dry-run)$", re.MULTILINE)


def _run(words: list[str], folder: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A command as a user runs it in another terminal, in the same folder."""
    return subprocess.run(words, cwd=folder, env=env, capture_output=True, text=True, check=False)


@pytest.mark.slow
def test_the_demos_replay_command_runs_as_printed(tmp_path: Path) -> None:
    """The tour's replay step, run in another process as printed: the count, then without
    --dry-run the deliveries that had succeeded arrive again, with the same ids."""
    env = environment(tmp_path / "home", CLUBWIRE_RETRY_SCHEDULE="1,1,1,1,1")
    with clubwire(tmp_path, env, "demo", "--port", str(free_port()), "--interval", "0.1") as demo:
        out = demo.until(lambda out: READY in out and len(_arrivals(out)) >= 3, "arrivals")
        printed = REPLAY.search(out)
        assert printed, out
        words = shlex.split(printed[1])
        counted = _run(words, tmp_path, env)
        assert counted.returncode == 0, counted.stderr
        assert re.fullmatch(r"\d+ deliver(y|ies) will be replayed\.\n", counted.stdout)
        before = {dlv for _, _, dlv, code in _arrivals(demo.out) if code == 200}
        sent = _run(words[:-1], tmp_path, env)
        assert sent.returncode == 0, sent.stderr
        assert re.fullmatch(r"Replayed \d+ deliver(y|ies)\.\n", sent.stdout), sent.stdout

        def again(out: str) -> bool:
            seen = Counter(dlv for _, _, dlv, code in _arrivals(out) if dlv in before)
            return any(count > 1 for count in seen.values())

        demo.until(again, "a replayed delivery arriving again")
        _stop(demo)
