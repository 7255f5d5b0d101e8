"""The secret key is checked at start, and ``clubwire secrets rekey`` changes it: real
``clubwire`` processes, a real TLS receiver, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import SecretStr
from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors, signing
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Delivery, Endpoint, SecretKeyCheck
from clubwire.web.app import create_app
from tests.conftest import SECRET_KEY
from tests.factories import EPOCH, make_club, make_endpoint, registration
from tests.functional.cli_runner import Invoke, ok, one_line_error
from tests.functional.processes import clubwire, environment
from tests.ports import free_port
from tests.receiver import Authority, Receiver

NEW_KEY = "the-new-secret-key-0123456789abcdefghijklmn"
WRONG_KEY = "a-wrong-secret-key-0123456789abcdefghijklmn"
REFUSED = "clubwire: error: CLUBWIRE_SECRET_KEY does not open the webhook signing secrets"
READY = "clubwire worker: delivering webhooks"
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


@pytest.fixture
def secret(sessions: sessionmaker[Session], settings: Settings, receiver: Receiver) -> str:
    """An endpoint at the receiver, sealed with the tests' key, and one event waiting for it;
    the endpoint's signing secret."""
    with sessions.begin() as session:
        club = make_club(session)
        _, secret = make_endpoint(session, club, settings, receiver.url, ("registration.created",))
        events.publish(session, club, "registration.created", registration(), EPOCH)
    return secret


def _env(tmp_path: Path, database_url: str, tls: Authority, key: str) -> dict[str, str]:
    return environment(
        tmp_path / "home",
        CLUBWIRE_DATABASE_URL=database_url,
        CLUBWIRE_SECRET_KEY=key,
        CLUBWIRE_ALLOW_PRIVATE_TARGETS="1",
        CLUBWIRE_CA_BUNDLE=str(tls.bundle),
    )


def _refused_at_start(tmp_path: Path, env: dict[str, str], *args: str) -> None:
    """``clubwire ARGS`` exits non-zero at once, with one line saying the key is wrong."""
    with clubwire(tmp_path, env, *args) as process:
        assert process.process.wait(60) != 0
        assert process.out == ""
        assert process.err.splitlines() == [process.err.strip()], process.err
        assert process.err.startswith(REFUSED)


def _deliveries(sessions: sessionmaker[Session]) -> list[tuple[str, int, object]]:
    with sessions() as session:
        return [
            (d.status, d.attempt, d.next_attempt_at is None)
            for d in session.scalars(select(Delivery))
        ]


def _sealed(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return [*session.scalars(select(Endpoint.secret_sealed)), *_checks(session)]


def _checks(session: Session) -> list[str]:
    return list(session.scalars(select(SecretKeyCheck.sealed)))


@pytest.mark.slow
@pytest.mark.parametrize("older", [False, True], ids=["checked", "older-database"])
def test_a_worker_with_a_wrong_key_exits_at_once_and_claims_nothing(
    sessions: sessionmaker[Session],
    secret: str,
    tmp_path: Path,
    database_url: str,
    tls: Authority,
    receiver: Receiver,
    older: bool,
) -> None:
    if older:  # as an older version left it: secrets stored, no check value
        with sessions.begin() as session:
            session.execute(delete(SecretKeyCheck))
    _refused_at_start(tmp_path, _env(tmp_path, database_url, tls, WRONG_KEY), "worker")
    assert _deliveries(sessions) == [("pending", 0, False)]
    assert receiver.received == []
    with sessions() as session:
        assert len(_checks(session)) == (0 if older else 1)


@pytest.mark.slow
def test_serve_with_a_wrong_key_exits_at_once(
    secret: str, tmp_path: Path, database_url: str, tls: Authority
) -> None:
    env = _env(tmp_path, database_url, tls, WRONG_KEY)
    _refused_at_start(tmp_path, env, "serve", "--port", str(free_port()))


@pytest.mark.slow
@SQLITE_ONLY
def test_the_demo_with_a_wrong_key_exits_at_once(
    secret: str, tmp_path: Path, database_url: str, tls: Authority
) -> None:
    env = _env(tmp_path, database_url, tls, WRONG_KEY)
    _refused_at_start(tmp_path, env, "demo", "--port", str(free_port()))


def test_the_app_refuses_to_start_with_a_wrong_key(secret: str, settings: Settings) -> None:
    wrong = settings.model_copy(update={"secret_key": SecretStr(WRONG_KEY)})
    with (
        pytest.raises(errors.ConfigurationError, match="CLUBWIRE_SECRET_KEY does not open"),
        TestClient(create_app(wrong)),
    ):
        pass


def test_commands_that_seal_or_open_a_secret_refuse_a_wrong_key(
    run: Invoke, monkeypatch: pytest.MonkeyPatch, secret: str, sessions: sessionmaker[Session]
) -> None:
    monkeypatch.setenv("CLUBWIRE_ALLOW_PRIVATE_TARGETS", "1")
    [listed] = json.loads(ok(run("endpoint", "list", "granite", "--json")).out)
    before = _sealed(sessions), _deliveries(sessions)
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", WRONG_KEY)
    for args in [
        ("endpoint", "create", "granite", "https://127.0.0.1:9/x", "--event", "member.updated"),
        ("endpoint", "rotate-secret", listed["id"]),
        ("endpoint", "test", listed["id"]),
    ]:
        assert one_line_error(run(*args)).startswith(REFUSED), args
    assert (_sealed(sessions), _deliveries(sessions)) == before


@pytest.mark.slow
def test_after_rekey_the_new_key_delivers_what_the_unchanged_secret_verifies(
    sessions: sessionmaker[Session],
    secret: str,
    tmp_path: Path,
    database_url: str,
    tls: Authority,
    receiver: Receiver,
) -> None:
    new_env = _env(tmp_path, database_url, tls, NEW_KEY)
    old_key = f"{SECRET_KEY}\n".encode()
    with clubwire(tmp_path, new_env, "secrets", "rekey", stdin=old_key) as rekey:
        assert rekey.process.wait(60) == 0, rekey.err
        assert rekey.out.startswith("Re-sealed 1 endpoint signing secret with CLUBWIRE_SECRET_KEY")
    _refused_at_start(tmp_path, _env(tmp_path, database_url, tls, SECRET_KEY), "worker")
    with clubwire(tmp_path, new_env, "worker") as worker:
        [arrived] = receiver.wait_for(1)
        assert worker.interrupt() == 0
    signing.verify(arrived.body, arrived.headers[signing.HEADER], secret)


def test_rekey_with_a_wrong_old_key_refuses_and_changes_nothing(
    run: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    secret: str,
    sessions: sessionmaker[Session],
    tmp_path: Path,
) -> None:
    before = _sealed(sessions)
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", NEW_KEY)
    old_key_file = tmp_path / "old-key"
    old_key_file.write_text(f"{WRONG_KEY}\n")
    refused = one_line_error(run("secrets", "rekey", "--old-key-file", str(old_key_file)))
    assert refused.endswith(
        "The old key does not open the secrets stored in this database: nothing was changed."
    )
    assert _sealed(sessions) == before


@pytest.mark.parametrize(
    ("old_key", "refusal"),
    [
        (NEW_KEY, "The old key is CLUBWIRE_SECRET_KEY itself"),
        ("short", "The old key has fewer than 32 characters"),
    ],
)
def test_rekey_refuses_an_old_key_that_cannot_be_one(
    run: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    secret: str,
    sessions: sessionmaker[Session],
    old_key: str,
    refusal: str,
) -> None:
    before = _sealed(sessions)
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", NEW_KEY)
    refused = one_line_error(run("secrets", "rekey", stdin=f"{old_key}\n".encode()))
    assert refusal in refused
    assert _sealed(sessions) == before


def test_rekey_run_twice_changes_nothing_the_second_time(
    run: Invoke, monkeypatch: pytest.MonkeyPatch, secret: str, sessions: sessionmaker[Session]
) -> None:
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", NEW_KEY)
    old_key = f"{SECRET_KEY}\n".encode()
    assert "Re-sealed 1 endpoint" in ok(run("secrets", "rekey", stdin=old_key)).out
    after = _sealed(sessions)
    again = ok(run("secrets", "rekey", stdin=old_key)).out
    assert again == "The stored secrets are already sealed with CLUBWIRE_SECRET_KEY: no change.\n"
    assert _sealed(sessions) == after
