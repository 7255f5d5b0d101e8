"""``clubwire listen`` and ``clubwire trigger`` as a club's developer uses them: a real
receiver process, a real worker process, and the instructions ``listen`` prints."""

from __future__ import annotations

import json
import shlex
import socket
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from clubwire import errors, receiving, signing
from tests.conftest import SECRET_KEY
from tests.functional.cli_runner import Invoke, ok, one_line_error
from tests.functional.processes import Clubwire, clubwire, environment
from tests.ports import free_port

READY = "Ctrl-C stops."
SQLITE_ONLY = pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)


def _endpoint(run: Invoke, monkeypatch: pytest.MonkeyPatch, url: str, kind: str) -> str:
    """The club granite with an endpoint at ``url`` for ``kind``; returns its secret."""
    monkeypatch.setenv("CLUBWIRE_ALLOW_PRIVATE_TARGETS", "1")
    ok(run("club", "create", "granite", "--name", "Granite Curling Club"))
    ok(run("club", "module", "granite", "on"))
    created = json.loads(
        ok(run("endpoint", "create", "granite", url, "--event", kind, "--json")).out
    )
    secret: str = created["secret"]
    return secret


def _worker_environment(printed: str, home: Path, database_url: str, **more: str) -> dict[str, str]:
    """A worker's environment with the settings ``listen`` printed for it."""
    line = next(line for line in printed.splitlines() if "CLUBWIRE_CA_BUNDLE=" in line)
    settings = dict(pair.split("=", 1) for pair in shlex.split(line))
    return environment(
        home, CLUBWIRE_DATABASE_URL=database_url, CLUBWIRE_SECRET_KEY=SECRET_KEY, **settings, **more
    )


def _once_dead(run: Invoke, timeout: float = 20) -> dict[str, object]:
    """The club's one delivery, once the worker has recorded it dead."""
    deadline = time.monotonic() + timeout
    while True:
        (delivery,) = json.loads(ok(run("delivery", "list", "granite", "--json")).out)
        if delivery["status"] == "dead" or time.monotonic() > deadline:
            assert delivery["status"] == "dead"
            return delivery  # type: ignore[no-any-return]
        time.sleep(0.05)


def _verified(listener: Clubwire, needle: str, count: int = 1) -> str:
    return listener.until(lambda out: out.count(needle) >= count, f"{count} × {needle!r}")


def _stopped(listener: Clubwire) -> None:
    assert listener.interrupt() == 0
    assert "Traceback" not in listener.err
    assert "stopped" in listener.err


@pytest.mark.slow
def test_listen_verifies_and_prints_a_delivery_from_a_real_worker(
    run: Invoke, monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path
) -> None:
    port = free_port()
    url = f"https://127.0.0.1:{port}/webhooks"
    secret = _endpoint(run, monkeypatch, url, "payment.completed")
    home = tmp_path / "home"
    args = ("listen", "--port", str(port), "--secret", "-")
    with clubwire(tmp_path, environment(home), *args, stdin=f"{secret}\n".encode()) as listener:
        printed = listener.until(lambda out: READY in out, "instructions")
        assert f"receiving webhooks at {url}" in printed
        event_id = json.loads(ok(run("trigger", "granite", "payment.completed", "--json")).out)[
            "id"
        ]
        with clubwire(tmp_path, _worker_environment(printed, home, database_url), "worker"):
            out = _verified(listener, f"✓ payment.completed {event_id} dlv_")
        assert "verified (200)" in out
        assert f'"id": "{event_id}",' in out  # the envelope, indented
        assert "v1 matches the secret" in out
        assert secret not in out
        _stopped(listener)


@contextmanager
def _delivering_to_listen(
    run: Invoke,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
    tmp_path: Path,
    *answer: str,
) -> Iterator[Clubwire]:
    """``clubwire listen`` answering as ``answer`` says, with granite's ``member.updated``
    endpoint at it and one such event published, and a worker delivering it (the schedule's
    steps 0 seconds) until the block ends; then the listener is stopped."""
    port = free_port()
    secret = _endpoint(run, monkeypatch, f"https://127.0.0.1:{port}/", "member.updated")
    home = tmp_path / "home"
    env = environment(home, CLUBWIRE_LISTEN_SECRET=secret)
    with clubwire(tmp_path, env, "listen", "--port", str(port), *answer) as listener:
        printed = listener.until(lambda out: READY in out, "instructions")
        ok(run("trigger", "granite", "member.updated"))
        worker = _worker_environment(printed, home, database_url, CLUBWIRE_RETRY_SCHEDULE="0,0")
        with clubwire(tmp_path, worker, "worker"):
            yield listener
        _stopped(listener)


@pytest.mark.slow
@SQLITE_ONLY
def test_listen_answers_the_status_asked_for_and_the_delivery_is_retried(
    run: Invoke, monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path
) -> None:
    answer = ("--status", "500")
    with _delivering_to_listen(run, monkeypatch, database_url, tmp_path, *answer) as listener:
        _verified(listener, "verified (500)", count=3)
        delivery = _once_dead(run)
    assert (delivery["attempt"], delivery["responseCode"]) == (3, 500)


@pytest.mark.slow
@SQLITE_ONLY
def test_listen_asks_to_wait_and_the_next_attempt_waits_as_asked(
    run: Invoke, monkeypatch: pytest.MonkeyPatch, database_url: str, tmp_path: Path
) -> None:
    answer = ("--status", "503", "--retry-after", "120")
    with _delivering_to_listen(run, monkeypatch, database_url, tmp_path, *answer) as listener:
        assert "answering 503 with Retry-After: 120 to deliveries" in listener.out
        _verified(listener, "verified (503)")
        delivery = _once_attempted(run)
    shown = json.loads(ok(run("delivery", "show", str(delivery["id"]), "--json")).out)
    (attempt,) = shown["attempts"]
    assert (attempt["responseCode"], attempt["retryAfter"]) == (503, "120")
    assert shown["nextAttemptAsked"] is True
    waited = _time(shown["nextAttemptAt"]) - _time(attempt["startedAt"])
    assert timedelta(seconds=120) <= waited < timedelta(seconds=180)
    said = ok(run("delivery", "show", str(delivery["id"]))).out
    assert f"Next attempt the receiver asked to wait until {shown['nextAttemptAt']}" in said


def _once_attempted(run: Invoke, timeout: float = 20) -> dict[str, object]:
    """The club's one delivery, once the worker has recorded an attempt of it."""
    deadline = time.monotonic() + timeout
    while True:
        (delivery,) = json.loads(ok(run("delivery", "list", "granite", "--json")).out)
        if delivery["attempt"] or time.monotonic() > deadline:
            assert delivery["attempt"] == 1
            return delivery  # type: ignore[no-any-return]
        time.sleep(0.05)


def _time(wire: str) -> datetime:
    return datetime.fromisoformat(wire)


@pytest.mark.slow
def test_listen_rejects_a_bad_or_missing_signature_with_400(tmp_path: Path) -> None:
    port = free_port()
    env = environment(tmp_path / "home", CLUBWIRE_LISTEN_SECRET="whsec_the-right-one")
    with clubwire(tmp_path, env, "listen", "--port", str(port)) as listener:
        listener.until(lambda out: READY in out, "instructions")
        trusting = ssl.create_default_context(cafile=tmp_path / "home" / "tls" / "ca.pem")
        body = b'{"id":"evt_1","event":"ping"}'
        forged = signing.sign("whsec_a-wrong-one", int(time.time()), body)
        for signature in (forged, None):
            headers = {"X-Service-Event": "ping", "X-Service-Delivery": "dlv_1"}
            if signature:
                headers[signing.HEADER] = signature
            request = urllib.request.Request(f"https://localhost:{port}/", body, headers)
            with pytest.raises(urllib.error.HTTPError) as answered:
                urllib.request.urlopen(request, context=trusting, timeout=5)
            assert answered.value.code == 400
            assert b"signature rejected" in answered.value.read()
        out = listener.until(lambda out: out.count("rejected (400)") == 2, "two rejections")
        assert "✗ ping dlv_1 rejected (400): no v1= signature matches" in out
        assert "header is missing or empty" in out
        _stopped(listener)


def test_trigger_publishes_the_catalog_sample(run: Invoke, monkeypatch: pytest.MonkeyPatch) -> None:
    _endpoint(run, monkeypatch, "https://127.0.0.1:9/hooks", "game.updated")
    first = ok(run("trigger", "granite", "game.updated")).out.strip()
    second = json.loads(ok(run("trigger", "granite", "game.updated", "--json")).out)["id"]
    assert first.startswith("evt_")
    deliveries = json.loads(ok(run("delivery", "list", "granite", "--json")).out)
    assert sorted(d["eventId"] for d in deliveries) == sorted([first, second])
    assert {d["status"] for d in deliveries} == {"pending"}


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (("trigger", "granite", "ping"), 2, "'ping' is not one of"),
        (("trigger", "granite", "nonsense"), 2, "Invalid value for 'KIND'"),
        (("trigger", "nowhere", "game.updated"), 1, "no club 'nowhere'"),
        (("listen", "--secret", "not-a-secret"), 1, "--secret is the endpoint's signing secret"),
        (("listen",), 2, "Missing option '--secret'"),
        *(
            (("listen", "--secret", "whsec_x", "--retry-after", value), 2, "'--retry-after'")
            for value in ("120\r\nX-Other: 1", "120\n", "١٢٠", "120\x07")
        ),
    ],
)
@SQLITE_ONLY
def test_bad_input_is_one_line(run: Invoke, args: tuple[str, ...], code: int, needle: str) -> None:
    ok(run("club", "create", "granite", "--name", "Granite"))
    assert needle in one_line_error(run(*args), code)


@SQLITE_ONLY
def test_listen_on_a_port_in_use_is_one_line(run: Invoke) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = str(taken.getsockname()[1])
        error = one_line_error(run("listen", "--port", port, "--secret", "whsec_x"))
    assert f"Cannot listen on 127.0.0.1 port {port}" in error


def test_the_local_ca_is_made_once_and_kept(tmp_path: Path) -> None:
    made = receiving.authority(tmp_path / "tls")
    ca = made.bundle.read_bytes()
    assert ca.startswith(b"-----BEGIN CERTIFICATE-----")
    assert receiving.authority(tmp_path / "tls").bundle.read_bytes() == ca
    assert made.server_context()  # its certificate and key load
    made.bundle.unlink()
    with pytest.raises(errors.ConfigurationError, match="delete that folder"):
        receiving.authority(tmp_path / "tls")
