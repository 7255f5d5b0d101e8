"""Operations end to end: /healthz, /readyz, /metrics (behind its token, or on a port of its
own), JSON log lines, ``clubwire prune``."""

from __future__ import annotations

import asyncio
import random
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families
from sqlalchemy import Engine, make_url, select, text
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import event_catalog, timestamps
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.services.metrics import Metrics
from clubwire.settings import Settings
from clubwire.storage import database, migrate
from clubwire.storage.models import Endpoint
from clubwire.web import context
from clubwire.web.app import create_app
from clubwire.worker import exposition, running
from tests import conftest
from tests.factories import (
    EPOCH,
    FakeClock,
    make_club,
    make_endpoint,
    make_key,
    make_staff,
    receiver_settings,
    registration,
)
from tests.functional import processes
from tests.functional.cli_runner import Invoke, ok, one_line_error
from tests.functional.ui_pages import browser
from tests.logcapture import Captured, capturing
from tests.ports import free_port
from tests.receiver import Authority, Receiver

API = "/clubs/granite/api/v1/programs"
METRICS_TOKEN = "metrics-token-for-tests-0123456789"
SCRAPER = {"Authorization": f"Bearer {METRICS_TOKEN}"}
ADMIN = "admin@granite.example"
# The test's own HTTP client and receiver log URLs with their query strings.
TEST_HARNESS = {"httpx2", "aiohttp.access"}
REQUESTS_TOTAL = "clubwire_http_requests_total"
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def samples(text: str) -> Samples:
    """Every sample of a scrape, by name and sorted labels."""
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def scrape(client: TestClient) -> Samples:
    response = client.get("/metrics", headers=SCRAPER)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


def requests_of(found: Samples, family: str, status: int) -> float:
    key = (REQUESTS_TOTAL, (("family", family), ("status", str(status))))
    return found.get(key, 0.0)


def attempts_of(found: Samples, outcome: str, trigger: str) -> float:
    key = ("clubwire_delivery_attempts_total", (("outcome", outcome), ("trigger", trigger)))
    return found.get(key, 0.0)


@pytest.fixture
def settings(database_url: str, tmp_path: Path) -> Settings:
    """The tests' settings, with a metrics token: the app serves /metrics to its holder."""
    return conftest.make_settings(database_url, tmp_path, metrics_token=METRICS_TOKEN)


@pytest.fixture
def captured(monkeypatch: pytest.MonkeyPatch) -> Iterator[Captured]:
    with capturing(monkeypatch) as lines:
        yield lines


@pytest.fixture
def hooks(settings: Settings, tls: Authority) -> Settings:
    return receiver_settings(
        settings,
        ca_bundle=tls.bundle,
        retry_schedule=(0, 0, 0, 0, 0),
        attempt_timeout=2.0,
        connect_timeout=1.0,
        lease_seconds=30.0,
    )


def _make_unreachable(client: TestClient, settings: Settings) -> None:
    """Take the database away from under a running app."""
    url = make_url(settings.sqlalchemy_url)
    if settings.is_sqlite:
        assert url.database is not None
        Path(url.database).unlink()
        Path(url.database).mkdir()  # "unable to open database file"
        context.of_scope({"state": client.app_state}).engine.dispose()
        return
    with conftest._admin() as admin:
        admin.execute(f'DROP DATABASE "{url.database}" WITH (FORCE)')


# ---------------------------------------------------------------------------- health


def test_healthz_says_the_process_is_up(client: TestClient) -> None:
    response = client.get("/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_readyz_says_ready_with_the_schema_at_head(client: TestClient) -> None:
    response = client.get("/readyz")
    assert (response.status_code, response.json()) == (200, {"status": "ready"})


def test_readyz_refuses_a_schema_behind_head(client: TestClient, engine: Engine) -> None:
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '0002'"))
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["code"] == "not_migrated"
    newest = migrate.head()
    assert f"at revision 0002, the newest is {newest}: run `clubwire migrate`" in problem["detail"]


def test_without_a_database_readyz_refuses_and_the_rest_still_answers(
    client: TestClient, settings: Settings
) -> None:
    _make_unreachable(client, settings)
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.headers["retry-after"] == "5"
    assert ready.json()["code"] == "database_unavailable"
    assert ready.json()["detail"] == errors.DatabaseUnavailable().detail
    assert client.get("/healthz").status_code == 200
    found = scrape(client)
    assert found[("clubwire_database_up", ())] == 0
    assert ("clubwire_deliveries_due", ()) not in found


# ---------------------------------------------------------------------------- metrics


def test_requests_are_counted_by_family_and_status(
    client: TestClient, sessions: sessionmaker[Session]
) -> None:
    with sessions.begin() as session:
        _, key = make_key(session, make_club(session))
    client.get(API, headers={"Authorization": f"Bearer {key}"})
    client.get(API, headers={"Authorization": f"Bearer {key}"})
    client.get(API)
    client.get("/internal/v1/clubs/granite")
    client.get("/settings/granite/webhooks", follow_redirects=False)
    client.get("/healthz")
    found = scrape(client)
    assert requests_of(found, "api", 200) == 2
    assert requests_of(found, "api", 401) == 1
    assert requests_of(found, "other", 200) == 1  # /healthz; this scrape counts after it
    counted = {labels: value for (name, labels), value in found.items() if name == REQUESTS_TOTAL}
    by_family = {family: 0.0 for family in ("api", "internal", "ui", "other")}
    for labels, value in counted.items():
        by_family[dict(labels)["family"]] += value
    assert by_family == {"api": 3, "internal": 1, "ui": 1, "other": 1}


@pytest.mark.parametrize(
    ("authorization", "detail", "challenge"),
    [
        (None, "Send the metrics token: Authorization: Bearer <CLUBWIRE_METRICS_TOKEN>.", ""),
        ("Basic bWV0cmljczp4", "Send the metrics token: Authorization", ""),
        ("Bearer not-the-metrics-token-0123", "The metrics token is not right.", "invalid_token"),
        (f"Bearer {METRICS_TOKEN[:-1]}", "The metrics token is not right.", "invalid_token"),
        (f"Bearer {METRICS_TOKEN}x", "The metrics token is not right.", "invalid_token"),
        ("Bearer \xe9t\xe9", "The metrics token is not right.", "invalid_token"),
    ],
)
def test_metrics_on_the_public_port_need_the_token(
    client: TestClient, authorization: str | None, detail: str, challenge: str
) -> None:
    headers = {} if authorization is None else {b"Authorization": authorization.encode("latin-1")}
    response = client.get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert (problem["code"], problem["status"]) == ("invalid_token", 401)
    assert problem["detail"].startswith(detail)
    assert METRICS_TOKEN not in response.text
    expected = 'Bearer realm="clubwire"' + (f', error="{challenge}"' if challenge else "")
    assert response.headers["www-authenticate"] == expected
    assert "clubwire_" not in response.text


def test_the_token_opens_the_metrics_whatever_the_schemes_case(client: TestClient) -> None:
    response = client.get("/metrics", headers={"Authorization": f"bearer {METRICS_TOKEN}"})
    assert response.status_code == 200
    assert REQUESTS_TOTAL in response.text


def test_without_a_token_the_public_port_has_no_metrics(
    database_url: str, tmp_path: Path, clock: FakeClock
) -> None:
    """Not served at all: the same 404 as any path that does not exist, to anyone."""
    untokened = conftest.make_settings(database_url, tmp_path)
    with TestClient(create_app(untokened, clock)) as client:
        for headers in ({}, SCRAPER):
            response = client.get("/metrics", headers=headers)
            assert response.status_code == 404
            assert response.content == client.get("/no-such-path", headers=headers).content
        assert client.get("/healthz").status_code == 200
        assert client.get("/readyz").status_code == 200


def test_the_due_queue_is_read_at_scrape_time(
    client: TestClient, sessions: sessionmaker[Session], settings: Settings, clock: FakeClock
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        make_endpoint(session, club, settings)
        for _ in range(3):
            events.publish(session, club, "registration.created", registration(), EPOCH)
    clock.advance(seconds=90)
    found = scrape(client)
    assert found[("clubwire_database_up", ())] == 1
    assert found[("clubwire_deliveries_due", ())] == 3
    assert found[("clubwire_oldest_due_delivery_age_seconds", ())] == 90


def test_deliveries_held_in_their_lines_are_counted_apart_from_those_due(
    client: TestClient, sessions: sessionmaker[Session], settings: Settings
) -> None:
    """Three events of one game to an ordered endpoint: one due, two held."""
    with sessions.begin() as session:
        club = make_club(session)
        endpoints.create_endpoint(
            session,
            club,
            "https://127.0.0.1:9/hooks",
            ["game.updated"],
            EPOCH,
            receiver_settings(settings),
            ordered=True,
        )
        game = event_catalog.sample("game.updated", EPOCH, random.Random(1))
        for _ in range(3):
            events.publish(session, club, "game.updated", game, EPOCH)
    found = scrape(client)
    assert found[("clubwire_deliveries_due", ())] == 1
    assert found[("clubwire_deliveries_held", ())] == 2


def test_an_empty_queue_is_zero(client: TestClient) -> None:
    found = scrape(client)
    assert found[("clubwire_deliveries_held", ())] == 0
    assert found[("clubwire_deliveries_due", ())] == 0
    assert found[("clubwire_oldest_due_delivery_age_seconds", ())] == 0


# ---------------------------------------------------------------------------- log lines


def test_each_request_has_an_id_and_one_log_line(
    client: TestClient, sessions: sessionmaker[Session], captured: Captured
) -> None:
    with sessions.begin() as session:
        record, key = make_key(session, make_club(session))
    first = client.get(f"{API}?page=2", headers={"Authorization": f"Bearer {key}"})
    second = client.get(API, headers={"Authorization": "Bearer cw_live_unknown123_" + "x" * 32})
    ids = [first.headers["x-request-id"], second.headers["x-request-id"]]
    assert ids[0] != ids[1]
    lines = captured.events("request")
    assert [line["request_id"] for line in lines] == ids
    assert lines[0] | {"time": "t", "duration_ms": 1} == {
        "time": "t",
        "level": "info",
        "event": "request",
        "request_id": ids[0],
        "method": "GET",
        "path": API,
        "status": 200,
        "duration_ms": 1,
        "club": "granite",
        "key_prefix": record.prefix,
    }
    assert lines[0]["duration_ms"] >= 0
    assert (lines[1]["status"], lines[1]["key_prefix"]) == (401, "unknown123")


def test_no_secret_reaches_the_logs(
    hooks: Settings,
    sessions: sessionmaker[Session],
    receiver: Receiver,
    captured: Captured,
) -> None:
    """A realistic flow: a signed-in admin creates an endpoint and sends a test to a real
    receiver; a program calls the API with a key, once with a secret in the query."""
    with sessions.begin() as session:
        _, key = make_key(session, make_club(session, "granite"))
    make_staff(sessions, ADMIN, clubs=["granite"])
    tab = "/settings/granite/webhooks"
    with browser(hooks, FakeClock()) as web:
        web.sign_in(ADMIN)
        web.get(tab)
        created = web.submit(tab, {"url": receiver.url, "event": ["registration.created"]})
        with sessions() as session:
            endpoint_id = session.scalars(select(Endpoint.id)).one()
        assert "Send test: 200 in" in web.submit(f"{tab}/{endpoint_id}/test").text
        web.client.get(API, headers={"Authorization": f"Bearer {key}"})
        web.client.get(f"{API}?api_key={key}&token=query-secret-123")
        cookie = web.client.cookies["clubwire_session"]
        found = scrape(web.client)
    (arrived,) = receiver.wait_for(1)
    secrets_seen = {
        "API key": key,
        "API key secret": key.rsplit("_", 1)[1],
        "signing secret": _signing_secret(created.text),
        "session cookie": cookie,
        "signature": arrived.headers["X-Service-Signature"],
        "query string": "query-secret-123",
        "Authorization value": "Bearer ",
        "metrics token": METRICS_TOKEN,
    }
    ours = [line for line in captured.lines() if line.get("logger") not in TEST_HARNESS]
    log = orjson.dumps(ours).decode()
    assert [name for name, value in secrets_seen.items() if value in log] == []
    (attempt,) = captured.events("attempt")
    assert (attempt["trigger"], attempt["outcome"], attempt["response_code"]) == (
        "test",
        "succeeded",
        200,
    )
    assert attempts_of(found, "succeeded", "test") == 1


def _signing_secret(page: str) -> str:
    start = page.index("whsec_")
    end = start + len("whsec_")
    while page[end].isalnum():
        end += 1
    return page[start:end]


# ---------------------------------------------------------------------------- the worker


def _fetch(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read()


def test_a_worker_counts_and_logs_attempts_and_serves_its_metrics(
    hooks: Settings,
    sessions: sessionmaker[Session],
    receiver: Receiver,
    captured: Captured,
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = make_endpoint(session, club, hooks, receiver.url, ("registration.created",))
        event, _ = events.publish(session, club, "registration.created", registration(), EPOCH)
    served = hooks.model_copy(update={"worker_metrics_port": free_port()})
    base = f"http://127.0.0.1:{served.worker_metrics_port}"
    metrics = Metrics()

    async def run() -> tuple[tuple[int, bytes], tuple[int, bytes]]:
        with metrics.watching_queue(sessions):
            async with (
                running.running(served, sessions, metrics=metrics),
                exposition.serving("127.0.0.1", served.worker_metrics_port, metrics),
            ):
                await asyncio.to_thread(receiver.wait_for, 1)
                for _ in range(200):
                    if captured.events("attempt"):
                        break
                    await asyncio.sleep(0.01)
                health = await asyncio.to_thread(_fetch, f"{base}/healthz")
                return health, await asyncio.to_thread(_fetch, f"{base}/metrics")

    health, scraped = asyncio.run(run())
    assert health == (200, b'{"status":"ok"}')
    found = samples(scraped[1].decode())
    assert attempts_of(found, "succeeded", "scheduled") == 1
    assert found[("clubwire_delivery_attempt_duration_seconds_count", ())] == 1
    assert ("clubwire_deliveries_due", ()) in found
    (line,) = captured.events("attempt")
    expected: dict[str, Any] = {
        "event_id": event.id,
        "endpoint_id": endpoint.id,
        "club_id": club.id,
        "trigger": "scheduled",
        "attempt": 1,
        "outcome": "succeeded",
        "response_code": 200,
        "error": None,
    }
    assert {name: line[name] for name in expected} == expected
    assert line["delivery_id"].startswith("dlv_")
    assert isinstance(line["duration_ms"], int)


def test_a_worker_counts_and_logs_how_a_receiver_steered_an_attempt(
    hooks: Settings,
    sessions: sessionmaker[Session],
    receiver: Receiver,
    captured: Captured,
) -> None:
    """A 429 that asks to wait an hour narrows the endpoint's lane and puts the retry off: two
    reasons for one attempt, in the metrics and in its log line (issue 33 item 5)."""
    receiver.status = 429
    receiver.answer_headers = [("Retry-After", "3600")]
    with sessions.begin() as session:
        club = make_club(session)
        make_endpoint(session, club, hooks, receiver.url, ("registration.created",))
        events.publish(session, club, "registration.created", registration(), EPOCH)
    metrics = Metrics()

    async def run() -> None:
        async with running.running(hooks, sessions, metrics=metrics):
            await asyncio.to_thread(receiver.wait_for, 1)
            for _ in range(200):
                if captured.events("attempt"):
                    return
                await asyncio.sleep(0.01)

    asyncio.run(run())
    found = samples(metrics.exposition().decode())
    steered = "clubwire_delivery_attempts_steered_total"
    assert found[(steered, (("reason", "retry_after"),))] == 1
    assert found[(steered, (("reason", "throttled"),))] == 1
    assert (steered, (("reason", "gone"),)) not in found
    (line,) = captured.events("attempt")
    assert (line["outcome"], line["response_code"], line["retry_after"]) == (
        "retrying",
        429,
        "3600",
    )
    assert line["steered"] == ["retry_after", "throttled"]


# ---------------------------------------------------------------------------- clubwire serve


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


@contextmanager
def _serve(settings: Settings, folder: Path, *args: str, **env: str) -> Iterator[str]:
    """A real ``clubwire serve ARGS`` on the test's database, ready; its base URL."""
    with settings_sessions(settings) as sessions, sessions.begin() as session:
        _, key = make_key(session, make_club(session))
    port = free_port()
    environment = processes.environment(
        folder,
        CLUBWIRE_DATABASE_URL=settings.database_url,
        CLUBWIRE_SECRET_KEY=conftest.SECRET_KEY,
        **env,
    )
    with processes.clubwire(folder, environment, "serve", "--port", str(port), *args):
        base = f"http://127.0.0.1:{port}"
        processes.wait_for(f"{base}/readyz", {})
        assert _get(base + API, {"Authorization": f"Bearer {key}"})[0] == 200
        yield base


@contextmanager
def settings_sessions(settings: Settings) -> Iterator[sessionmaker[Session]]:
    engine = database.engine_for(settings)
    try:
        yield database.sessions(engine)
    finally:
        engine.dispose()


def test_serve_keeps_its_metrics_on_the_metrics_port(database_url: str, tmp_path: Path) -> None:
    untokened = conftest.make_settings(database_url, tmp_path)
    metrics_port = free_port()
    with _serve(untokened, tmp_path, "--metrics-port", str(metrics_port)) as base:
        own = f"http://127.0.0.1:{metrics_port}"
        status, body = _get(f"{own}/metrics")
        assert status == 200
        assert requests_of(samples(body.decode()), "api", 200) == 1
        assert _get(f"{own}/healthz") == (200, b'{"status":"ok"}')
        for headers in ({}, SCRAPER):
            status, body = _get(f"{base}/metrics", headers)
            assert (status, orjson.loads(body)["code"]) == (404, "not_found")


def test_serve_answers_metrics_both_ways_from_its_settings(
    database_url: str, tmp_path: Path
) -> None:
    untokened = conftest.make_settings(database_url, tmp_path)
    metrics_port = free_port()
    env = {
        "CLUBWIRE_METRICS_TOKEN": METRICS_TOKEN,
        "CLUBWIRE_SERVE_METRICS_PORT": str(metrics_port),
    }
    with _serve(untokened, tmp_path, **env) as base:
        assert _get(f"{base}/metrics")[0] == 401
        status, body = _get(f"{base}/metrics", SCRAPER)
        assert status == 200
        assert requests_of(samples(body.decode()), "api", 200) == 1
        status, body = _get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert (status, requests_of(samples(body.decode()), "other", 401)) == (200, 1)


def test_a_short_metrics_token_stops_serve_with_one_line(
    run: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUBWIRE_METRICS_TOKEN", "too-short")
    error = one_line_error(run("serve", "--port", str(free_port())))
    assert "CLUBWIRE_METRICS_TOKEN" in error
    assert "at least 16 characters" in error
    assert "too-short" not in error


# ---------------------------------------------------------------------------- clubwire prune


def test_prune_deletes_old_history_once_and_says_how_much(
    run: Invoke, sessions: sessionmaker[Session], settings: Settings
) -> None:
    with sessions.begin() as session:
        club = make_club(session)
        make_endpoint(session, club, settings)
        club.webhooks_enabled = False  # the events are recorded with no deliveries
        club.payload_days = 1
        now = timestamps.utc_now()
        for days in (31, 2):  # deleted; its payload expired
            at = now - timedelta(days=days)
            events.publish(session, club, "registration.created", registration(), at)
    printed = orjson.loads(ok(run("prune", "--json")).out)
    assert printed == {
        "attempts": 0,
        "deliveries": 0,
        "events": 1,
        "emails": 0,
        "signInFailures": 0,
        "flashes": 0,
        "payloads": 1,
        "retentionDays": 30,
    }
    assert ok(run("prune")).out == (
        "Deleted 0 attempts, 0 deliveries, 0 events and 0 sent emails older than 30 days, "
        "0 spent counts of failed sign-ins and 0 stale flashes; emptied 0 expired payloads.\n"
    )
