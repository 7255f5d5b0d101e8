"""docs/operations.md works as written: its ``sh`` steps run against the local PostgreSQL.

They create a database (named by ``PGDATABASE``: a fresh one per run), migrate it, start
``clubwire serve`` and ``clubwire worker``, call the API, scrape the metrics both ways (with
the token on the API's port, and on serve's metrics port) and stop them; the database is
dropped afterwards whatever happens. Then "Try it with a collector" does it again traced,
into a real OTLP/HTTP collector (``tests.collector``, named by ``COLLECTOR_URL``), with
``clubwire listen`` as the receiver, and publishes through the internal API in the platform's
trace: that trace must hold serve's request and publish and the worker's attempt.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.collector import Collected, collecting
from tests.conftest import POSTGRES_URL, REQUIRE_POSTGRES
from tests.docs import markdown
from tests.docs.conftest import base_env
from tests.docs.running import run_shell
from tests.ports import free_port

DOC = markdown.DOCS / "operations.md"
PLATFORM_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"  # the traceparent the steps send


def _admin() -> psycopg.Connection[tuple[object, ...]]:
    try:
        return psycopg.connect(POSTGRES_URL, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        reason = f"PostgreSQL is unreachable at {POSTGRES_URL}: {str(exc).strip()}"
        if REQUIRE_POSTGRES:
            pytest.fail(f"{reason} (CLUBWIRE_REQUIRE_POSTGRES=1)")
        pytest.skip(reason)


@pytest.fixture
def database_name() -> Iterator[str]:
    name = f"clubwire_docs_{secrets.token_hex(6)}"
    with _admin() as admin:
        try:
            yield name
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_the_postgresql_steps_run_as_written(database_name: str, tmp_path: Path) -> None:
    env = {
        **{name: value for name, value in base_env().items() if not name.startswith("OTEL_")},
        "PGDATABASE": database_name,
        "PORT": str(free_port()),
        "METRICS_PORT": str(free_port()),
        "LISTEN_PORT": str(free_port()),
    }
    with collecting() as collector:
        output = run_shell(DOC, {**env, "COLLECTOR_URL": collector.url}, tmp_path, timeout=180)
        spans = collector.wait_for(_delivered_in_the_platforms_trace)
    assert '{"data":[]}' in output, output
    lines = output.splitlines()
    assert "clubwire_deliveries_due 0.0" in lines, output  # with the token, on the API's port
    api_200 = 'clubwire_http_requests_total{family="api",status="200"} 1.0'
    assert api_200 in lines, output  # on serve's metrics port
    assert "without the token: 401" in lines, output
    with _admin() as admin:
        found = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database_name,))
        assert found.fetchone() is None, "the steps end by dropping their database"
    _check_the_trace([span for span in spans if span.trace_id == PLATFORM_TRACE])


def _delivered_in_the_platforms_trace(spans: list[Collected]) -> bool:
    """Both processes' spans came: serve's request and the worker's record."""
    names = {span.name for span in spans if span.trace_id == PLATFORM_TRACE}
    return {"record", "POST /internal/v1/clubs/{slug}/events"} <= names


def _check_the_trace(spans: list[Collected]) -> None:
    """The spans "Try it with a collector" says the collector holds, from the roles it says."""
    made = {(span.name, span.kind, span.resource["clubwire.role"]) for span in spans}
    assert made == {
        ("POST /internal/v1/clubs/{slug}/events", "SPAN_KIND_SERVER", "serve"),
        ("publish payment.completed", "SPAN_KIND_PRODUCER", "serve"),
        ("deliver payment.completed", "SPAN_KIND_CONSUMER", "worker"),
        ("POST", "SPAN_KIND_CLIENT", "worker"),
        ("record", "SPAN_KIND_INTERNAL", "worker"),
    }, spans
    served = next(span for span in spans if span.kind == "SPAN_KIND_SERVER")
    assert served.parent_id == "00f067aa0ba902b7"
    assert served.resource["deployment.environment.name"] == "trial"
    assert served.resource["service.name"] == "clubwire"
    (delivered,) = (span for span in spans if span.kind == "SPAN_KIND_CONSUMER")
    assert delivered.attributes["clubwire.delivery.outcome"] == "succeeded"


def test_the_steps_start_and_stop_both_roles() -> None:
    script = "\n".join(b.text for b in markdown.blocks(DOC) if b.lang in markdown.SHELL)
    for step in ("createdb", "clubwire migrate", "clubwire serve", "clubwire worker", "kill"):
        assert step in script
    assert 'export OTEL_EXPORTER_OTLP_ENDPOINT="${COLLECTOR_URL:-http://127.0.0.1:4318}"' in script


def test_the_steps_show_both_ways_to_keep_metrics_off_the_public_port() -> None:
    script = "\n".join(b.text for b in markdown.blocks(DOC) if b.lang in markdown.SHELL)
    assert "export CLUBWIRE_METRICS_TOKEN=" in script
    assert 'Authorization: Bearer $CLUBWIRE_METRICS_TOKEN" "$CLUBWIRE_PUBLIC_URL/metrics"' in script
    assert 'clubwire serve --port "${PORT:-8000}" --metrics-port "${METRICS_PORT:-9100}"' in script
