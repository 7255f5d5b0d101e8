"""The ``clubwire`` command as a new user would try it: ``migrate``, clubs and programs, API
keys, bad settings, ``serve``. The webhook commands: ``test_webhooks.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select, update
from sqlalchemy.orm import Session

from clubwire.domain import timestamps
from clubwire.services.club_api import keys
from clubwire.storage import migrate
from clubwire.storage.models import ApiKey, Club, Program
from tests.conftest import SECRET_KEY
from tests.factories import program_data
from tests.functional.cli_runner import Invoke, ok, one_line_error
from tests.functional.processes import wait_for
from tests.ports import free_port


def test_migrate_reports_the_revision(run: Invoke) -> None:
    assert f"revision {migrate.head()}" in ok(run("migrate")).out


def test_club_create_module_and_list(run: Invoke) -> None:
    created = json.loads(ok(run("club", "create", "granite", "--name", "Granite CC", "--json")).out)
    assert created["slug"] == "granite"
    assert created["webhooksEnabled"] is False
    assert (
        ok(run("club", "module", "granite", "on")).out.strip()
        == "Webhooks & API is on for granite."
    )
    listed = json.loads(ok(run("club", "list", "--json")).out)
    assert [(c["slug"], c["webhooksEnabled"]) for c in listed] == [("granite", True)]
    assert "granite" in ok(run("club", "list")).out


def test_club_payloads_sets_and_clears_the_days_and_list_shows_them(run: Invoke) -> None:
    ok(run("club", "create", "granite", "--name", "Granite CC"))
    said = ok(run("club", "payloads", "granite", "--days", "7")).out
    assert said == "Payloads of granite are kept for 7 days.\n"
    assert "granite  Granite CC  off     for 7 days" in ok(run("club", "list")).out
    cleared = json.loads(ok(run("club", "payloads", "granite", "--history", "--json")).out)
    assert cleared["payloadDays"] is None
    listed = json.loads(ok(run("club", "list", "--json")).out)
    assert [c["payloadDays"] for c in listed] == [None]
    assert "as long as the history (30 days)" in ok(run("club", "list")).out


@pytest.mark.parametrize(
    ("args", "needle", "code"),
    [
        (("--days", "0"), "from 1 to 30: payloads are never kept longer than the history", 1),
        (("--days", "31"), "from 1 to 30", 1),
        (("--days", "-2"), "from 1 to 30", 1),
        (("--days", "7.5"), "'7.5' is not a valid integer", 2),
        (("--days", "seven"), "'seven' is not a valid integer", 2),
        ((), "Give either --days N or --history.", 2),
        (("--days", "7", "--history"), "Give either --days N or --history.", 2),
    ],
)
def test_club_payloads_refuses_what_is_no_days_in_one_line(
    run: Invoke, args: tuple[str, ...], needle: str, code: int
) -> None:
    ok(run("club", "create", "granite", "--name", "Granite CC", "--json"))
    assert needle in one_line_error(run("club", "payloads", "granite", *args), code)
    listed = json.loads(ok(run("club", "list", "--json")).out)
    assert [c["payloadDays"] for c in listed] == [None]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (("club", "create", "Bad Slug", "--name", "x"), "slug"),
        (("club", "module", "nowhere", "on"), "no club 'nowhere'"),
        (("key", "list", "nowhere"), "no club"),
    ],
)
def test_bad_club_input_is_one_line(run: Invoke, args: tuple[str, ...], needle: str) -> None:
    assert needle in one_line_error(run(*args))


@pytest.mark.parametrize(
    "args",
    [
        ("club", "create", "granite"),
        ("club", "module", "granite", "maybe"),
        ("key", "create", "granite"),
        ("nonsense",),
        ("serve", "--port", "70000"),
    ],
)
def test_usage_errors_are_one_line_with_exit_2(run: Invoke, args: tuple[str, ...]) -> None:
    assert "--help" in one_line_error(run(*args), code=2)


@pytest.mark.parametrize("name", ["Granite\nCC", "Granite\r", "Gran\x85ite", "Gran\u2028ite"])
def test_a_club_name_with_a_control_character_is_refused_in_one_line(
    run: Invoke, name: str
) -> None:
    line = one_line_error(run("club", "create", "granite", "--name", name))
    assert "A club name must be one line, without control or text-direction characters" in line
    assert json.loads(ok(run("club", "list", "--json")).out) == []


def test_club_list_shows_a_name_stored_before_the_rule_escaped(
    run: Invoke, database_url: str
) -> None:
    """Names stored before issue 31 are kept; a terminal is not told to recolour itself."""
    ok(run("club", "create", "granite", "--name", "Granite"))
    engine = create_engine(database_url)
    with engine.begin() as connection:
        connection.execute(update(Club).values(name="Gran\x1b[31mite\r\nCC"))
    engine.dispose()
    shown = ok(run("club", "list")).out
    assert "\x1b" not in shown
    assert "Gran\\x1b[31mite\\r\\nCC" in shown
    assert len(shown.splitlines()) == 2


def test_duplicate_club_is_refused(run: Invoke) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    assert "exists already" in one_line_error(run("club", "create", "granite", "--name", "Again"))


def test_program_import_upserts(run: Invoke, tmp_path: Path) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    path = tmp_path / "programs.json"
    path.write_text(
        json.dumps([{"id": "a", **program_data()}, {"id": "b", **program_data(private=True)}])
    )
    first = ok(run("program", "import", "granite", str(path)))
    assert (
        first.out.strip() == "Imported 2 programs into granite: 2 created, 0 updated, 0 unchanged."
    )
    path.write_text(
        json.dumps(
            [{"id": "a", **program_data(capacity=1)}, {"id": "b", **program_data(private=True)}]
        )
    )
    assert json.loads(ok(run("program", "import", "granite", str(path), "--json")).out) == {
        "created": 0,
        "updated": 1,
        "unchanged": 1,
    }


def test_program_import_reads_stdin(run: Invoke) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    data = json.dumps([{"id": "a", **program_data()}]).encode()
    assert "1 created" in ok(run("program", "import", "granite", "-", stdin=data)).out


def test_program_import_stores_the_largest_price_exactly(run: Invoke, database_url: str) -> None:
    """The same answer as ``PUT /internal/v1/clubs/{slug}/programs/{id}``, on both databases."""
    ok(run("club", "create", "granite", "--name", "Granite"))
    data = json.dumps([{"id": "a", **program_data(price=99_999_999.99)}]).encode()
    assert "1 created" in ok(run("program", "import", "granite", "-", stdin=data)).out
    engine = create_engine(database_url)
    try:
        with Session(engine) as session:
            assert session.scalar(select(Program.price_cents)) == 9_999_999_999
    finally:
        engine.dispose()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "is not JSON"),
        (b'{"id": "a"}', "JSON array"),
        (
            json.dumps(
                [{"id": "a", **program_data()}, {"id": "b", **program_data(price=-5)}]
            ).encode(),
            "program 2: price",
        ),
        (
            json.dumps(
                [{"id": "a", **program_data()}, {"id": "b", **program_data(price=100_000_000.00)}]
            ).encode(),
            "program 2: price",
        ),
        (
            json.dumps([{"id": "a", **program_data()}, {"id": "a", **program_data()}]).encode(),
            "appears twice",
        ),
    ],
)
def test_a_bad_import_file_stores_nothing(
    run: Invoke, tmp_path: Path, content: bytes, needle: str
) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    path = tmp_path / "programs.json"
    path.write_bytes(content)
    assert needle in one_line_error(run("program", "import", "granite", str(path)))
    path.write_text(json.dumps([{"id": "z", **program_data()}]))
    assert "1 created" in ok(run("program", "import", "granite", str(path))).out


def test_a_missing_import_file_is_one_line(run: Invoke) -> None:
    assert "does not exist" in one_line_error(
        run("program", "import", "granite", "/nope.json"), code=2
    )


def test_key_lifecycle(run: Invoke) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    created = ok(run("key", "create", "granite", "--scope", "read:programs", "--name", "Website"))
    key = created.out.strip()
    assert key.startswith("cw_live_")
    assert "\n" not in key
    assert "shown once" in created.err
    as_json = json.loads(
        ok(
            run(
                "key",
                "create",
                "granite",
                "--scope",
                "read:games",
                "--scope",
                "read:programs",
                "--json",
            )
        ).out
    )
    assert as_json["key"].startswith(f"cw_live_{as_json['prefix']}_")
    assert as_json["scopes"] == ["read:programs", "read:games"]
    listed = json.loads(ok(run("key", "list", "granite", "--json")).out)
    assert [k["status"] for k in listed] == ["active", "active"]
    assert key not in json.dumps(listed)
    prefix = key.split("_")[2]
    assert ok(run("key", "revoke", "granite", prefix)).out.strip() == f"Key {prefix} is revoked."
    assert (
        json.loads(ok(run("key", "revoke", "granite", prefix, "--json")).out)["status"] == "revoked"
    )
    table = ok(run("key", "list", "granite")).out
    assert "revoked" in table
    assert "Website" in table
    assert key not in table


def test_key_expiry_and_last_use_in_the_list(run: Invoke, database_url: str) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    before = datetime.now(UTC)
    made = json.loads(ok(run("key", "create", "granite", "--scope", "read:programs", "--json")).out)
    assert made["expiresAt"] is None
    assert made["status"] == "active"
    expiring = json.loads(
        ok(
            run(
                "key",
                "create",
                "granite",
                "--scope",
                "read:programs",
                "--expires-in",
                "30d",
                "--json",
            )
        ).out
    )
    expires = datetime.fromisoformat(expiring["expiresAt"])
    assert before + timedelta(days=30) <= expires <= datetime.now(UTC) + timedelta(days=30)
    expired_at = before - timedelta(seconds=1)
    engine = create_engine(database_url)
    try:
        with Session(engine) as session, session.begin():
            keys.note_use(session, made["id"], before, "203.0.113.7", "club-site/1.0")
            session.execute(
                update(ApiKey).where(ApiKey.id == expiring["id"]).values(expires_at=expired_at)
            )
    finally:
        engine.dispose()
    listed = {k["prefix"]: k for k in json.loads(ok(run("key", "list", "granite", "--json")).out)}
    used, gone = listed[made["prefix"]], listed[expiring["prefix"]]
    assert used["lastUsedAt"] == timestamps.to_wire(before)
    assert (used["lastUsedIp"], used["lastUsedUserAgent"]) == ("203.0.113.7", "club-site/1.0")
    assert used["status"] == "active"
    assert gone["status"] == "expired"
    assert gone["expiresAt"] == timestamps.to_wire(expired_at)
    assert (gone["lastUsedAt"], gone["lastUsedIp"], gone["lastUsedUserAgent"]) == (None,) * 3
    table = ok(run("key", "list", "granite")).out.splitlines()
    assert table[0].split() == [
        "PREFIX", "NAME", "SCOPES", "CREATED", "EXPIRES", "STATUS", "LAST", "USED", "FROM",
        "USER", "AGENT",
    ]  # fmt: skip
    (used_row,) = [line for line in table if line.startswith(made["prefix"])]
    assert "never" in used_row
    assert "203.0.113.7" in used_row
    assert used_row.endswith("club-site/1.0")
    (gone_row,) = [line for line in table if line.startswith(expiring["prefix"])]
    assert "expired" in gone_row
    assert timestamps.to_wire(expired_at) in gone_row


@pytest.mark.parametrize("choice", ["7d", "30", "forever"])
def test_an_unknown_expiry_is_a_usage_error(run: Invoke, choice: str) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    args = ("key", "create", "granite", "--scope", "read:programs", "--expires-in", choice)
    assert "30d" in one_line_error(run(*args), code=2)
    assert json.loads(ok(run("key", "list", "granite", "--json")).out) == []


def test_bad_scope_and_unknown_prefix(run: Invoke) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    assert "Unknown scope write:all" in one_line_error(
        run("key", "create", "granite", "--scope", "write:all")
    )
    assert "no API key" in one_line_error(run("key", "revoke", "granite", "NoSuchPfx1"))


def test_bad_settings_are_one_line(run: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUBWIRE_PUBLIC_URL", "ftp://nope")
    assert "CLUBWIRE_PUBLIC_URL" in one_line_error(run("club", "list"))


@pytest.mark.slow
def test_serve_answers_the_api_in_a_real_process(
    run: Invoke, database_url: str, tmp_path: Path
) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    ok(run("club", "module", "granite", "on"))
    path = tmp_path / "programs.json"
    path.write_text(json.dumps([{"id": "a", **program_data()}]))
    ok(run("program", "import", "granite", str(path)))
    key = ok(run("key", "create", "granite", "--scope", "read:programs")).out.strip()
    port = free_port()
    env = {**os.environ, "CLUBWIRE_DATABASE_URL": database_url, "CLUBWIRE_SECRET_KEY": SECRET_KEY}
    server = subprocess.Popen(
        [sys.executable, "-m", "clubwire", "serve", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        body = wait_for(
            f"http://127.0.0.1:{port}/clubs/granite/api/v1/programs",
            {"Authorization": f"Bearer {key}"},
        )
        assert [p["id"] for p in json.loads(body)["data"]] == ["a"]
        server.send_signal(signal.SIGINT)  # Ctrl-C: a clean stop, not an error
        output = server.communicate(timeout=20)[0].decode()
    finally:
        if server.poll() is None:
            server.kill()
            server.communicate()
    assert server.returncode == 0, output
    assert "aborted" not in output
    assert "Traceback" not in output
    assert key not in output


@pytest.mark.slow
def test_serve_refuses_an_unmigrated_postgres_schema(
    postgres_template: str, tmp_path: Path
) -> None:
    from tests.conftest import POSTGRES_URL, _admin

    name = f"clubwire_empty_{os.getpid()}"
    with _admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            url = POSTGRES_URL.rpartition("/")[0] + f"/{name}"
            env = {**os.environ, "CLUBWIRE_DATABASE_URL": url, "CLUBWIRE_SECRET_KEY": SECRET_KEY}
            done = subprocess.run(
                [sys.executable, "-m", "clubwire", "serve", "--port", str(free_port())],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=30,
                check=False,
            )
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [
        "clubwire: error: The database schema is at revision none, the newest is "
        f"{migrate.head()}: run `clubwire migrate`."
    ]
