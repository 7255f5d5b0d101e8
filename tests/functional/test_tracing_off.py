"""Tracing that is off, cannot start, or has nowhere to send (issue 36), in real processes.

* Off (no endpoint variable, ``OTEL_SDK_DISABLED=true``, ``OTEL_TRACES_EXPORTER=none``):
  the app and its worker run without importing OpenTelemetry's SDK or exporter.
* Asked for but impossible (the extra not installed; a variable the SDK refuses): one JSON
  line says so, and the process delivers untraced and stops cleanly.
* A collector that answers 503 or never answers: every delivery arrives, the SDK's
  complaints are a few JSON lines, and SIGTERM still ends the worker with exit 0.
"""

from __future__ import annotations

import json
import subprocess
import sys
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.collector import collecting
from tests.conftest import PLATFORM_TOKEN
from tests.functional.processes import clubwire, environment
from tests.functional.worker.test_tracing_processes import (
    TRACEPARENT,
    club,
    publish,
    serve,
    sqlite_database,
    stop,
    traced,
)
from tests.functional.workers import (
    READY,
    count_settled,
    publish_registrations,
    worker_environment,
)
from tests.receiver import authority, serving

pytestmark = pytest.mark.slow

ROOT = Path(__file__).parents[2]
SDK = ("opentelemetry.sdk", "opentelemetry.exporter")
EXTRA = "pip install 'clubwire[otel]'"

# Run in a process of its own: under each environment, tracing.start for serve and worker,
# then the app with its in-process worker publishes an event over the internal API and
# attempts its delivery (to a port nothing listens on); prints, for each, the SDK and
# exporter modules imported by then. The last environment asks for traces: the control.
NOTHING_IMPORTED = """
import json, os, sys, time
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from clubwire import tracing
from clubwire.storage import database
from clubwire.storage.models import Attempt
from clubwire.web.app import create_app
from tests.conftest import PLATFORM_TOKEN, make_settings
from tests.factories import registration
from tests.functional.workers import add_endpoint

url, home, environments = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
SDK = ("opentelemetry.sdk", "opentelemetry.exporter")
settings = make_settings(url, home, allow_private_targets=True)
sessions = database.sessions(database.engine_for(settings))
add_endpoint(sessions, settings, "https://127.0.0.1:1/hooks")
imported = {}
for number, (name, environment) in enumerate(environments.items(), 1):
    os.environ.update(environment)
    started = [tracing.start("serve"), tracing.start("worker")]
    with TestClient(create_app(settings, run_worker=True)) as client:
        answer = client.post(
            "/internal/v1/clubs/granite/events",
            json={"event": "registration.created", "data": registration()},
            headers={"Authorization": f"Bearer {PLATFORM_TOKEN}"},
        )
        assert answer.status_code == 201, answer.text
        with sessions() as session:
            while session.scalar(select(func.count()).select_from(Attempt)) < number:
                time.sleep(0.02)
                session.rollback()
    tracing.stop()
    modules = sorted(m for m in sys.modules if m.startswith(SDK))
    imported[name] = [started, modules]
    for variable in environment:
        del os.environ[variable]
print(json.dumps(imported))
"""

# Installed as sitecustomize: OpenTelemetry's SDK and exporter are not there to import.
MISSING = """
import sys

class Missing:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[:2] in (["opentelemetry", "sdk"], ["opentelemetry", "exporter"]):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Missing())
"""


def without_otel(env: dict[str, str]) -> dict[str, str]:
    """``env`` without the OTEL variables of whoever runs the tests."""
    return {name: value for name, value in env.items() if not name.startswith("OTEL_")}


def script(code: str, tmp_path: Path, *args: str) -> Any:
    """What ``code``, run by Python in a process of its own with ``args``, printed (JSON)."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        env=without_otel(environment(tmp_path)),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def json_lines(err: str) -> list[dict[str, object]]:
    """Standard error's lines, each one JSON (but the worker's ready line, for a person)."""
    lines = [line for line in err.splitlines() if line and not line.startswith(READY)]
    return [orjson.loads(line) for line in lines]


def said(err: str, level: str) -> list[str]:
    """The messages of standard error's lines at ``level``."""
    return [str(line.get("message")) for line in json_lines(err) if line["level"] == level]


def test_tracing_off_imports_nothing_of_the_sdk(sqlite_template: Path, tmp_path: Path) -> None:
    """Off three ways, the app, its worker, a publish and an attempt import nothing of the
    SDK or the exporter (FastAPI's dependencies import OpenTelemetry's API: not checked);
    then on, as a control, they do."""
    url = sqlite_database(sqlite_template, tmp_path)
    with collecting() as collector:
        environments = {
            "no variable": {},
            "disabled": {
                "OTEL_SDK_DISABLED": "true",
                "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
            },
            "exporter none": {
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": collector.url,
            },
            "on": {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url},
        }
        imported = script(NOTHING_IMPORTED, tmp_path, url, str(tmp_path), json.dumps(environments))
    off = {name: [[False, False], []] for name in environments if name != "on"}
    assert {name: imported[name] for name in off} == off
    started, modules = imported["on"]
    assert started == [True, True]
    assert {part for part in SDK if any(m.startswith(part) for m in modules)} == set(SDK)
    assert collector.named("publish registration.created")


def test_without_the_extra_a_worker_says_so_once_and_delivers_untraced(
    postgres_database: str, tmp_path: Path
) -> None:
    """OpenTelemetry's SDK and exporter cannot be imported (a ``sitecustomize`` takes them
    away): one warning naming the extra, a delivery without a ``traceparent``, exit 0."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(MISSING)
    tls = authority(tmp_path)
    with collecting() as collector, serving(tls) as receiver:
        with club(postgres_database, tmp_path, receiver) as sessions:
            env = worker_environment(postgres_database, tls.bundle)
            env = traced(env, collector, PYTHONPATH=str(tmp_path / "site"))
            with clubwire(tmp_path, env, "worker") as worker:
                worker.until(lambda err: READY in err, "worker ready", stream="err")
                publish_registrations(sessions)
                (arrived,) = receiver.wait_for(1)
                stop(worker)
        assert collector.requests == 0
    assert "traceparent" not in arrived.headers
    (warning,) = said(worker.err, "warning")
    assert "OTEL_EXPORTER_OTLP_ENDPOINT" in warning
    assert EXTRA in warning
    assert said(worker.err, "error") == []


def test_a_variable_the_sdk_refuses_is_one_error_and_serve_delivers_untraced(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """A batch larger than the queue: one error line, and serve delivers (without the
    platform's ``traceparent`` or one of its own) and stops with exit 0."""
    url = sqlite_database(sqlite_template, tmp_path)
    tls = authority(tmp_path)
    with collecting() as collector, serving(tls) as receiver, ExitStack() as stack:
        stack.enter_context(club(url, tmp_path, receiver))
        env = worker_environment(url, tls.bundle, CLUBWIRE_PLATFORM_TOKEN=PLATFORM_TOKEN)
        refused = {"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1000", "OTEL_BSP_MAX_QUEUE_SIZE": "10"}
        server, port = serve(stack, tmp_path, traced(env, collector, **refused))
        publish(port, traceparent=TRACEPARENT)
        (arrived,) = receiver.wait_for(1)
        stop(server)
        assert collector.requests == 0
    assert "traceparent" not in arrived.headers
    (error,) = said(server.err, "error")
    assert "max_export_batch_size" in error, error
    assert said(server.err, "warning") == []


@pytest.mark.parametrize("answer", [{"status": 503}, {"hang": True}], ids=["503", "stuck"])
def test_a_collector_refusing_or_stuck_costs_no_delivery_and_few_lines(
    postgres_database: str, tmp_path: Path, answer: dict[str, object]
) -> None:
    """200 deliveries by a worker whose span queue (64) overflows: all arrive; what the SDK
    says of it is a few JSON lines, not one a batch or a span; SIGTERM still ends it, 0."""
    count = 200
    small = {
        "OTEL_BSP_SCHEDULE_DELAY": "10",
        "OTEL_BSP_MAX_QUEUE_SIZE": "64",
        "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "64",
    }
    tls = authority(tmp_path)
    with collecting(**answer) as collector, serving(tls) as receiver:
        with club(postgres_database, tmp_path, receiver) as sessions:
            publish_registrations(sessions, count)
            env = traced(worker_environment(postgres_database, tls.bundle), collector, **small)
            with clubwire(tmp_path, env, "worker") as worker:
                worker.until(
                    lambda _: count_settled(sessions) == count, "every delivery", 120, "err"
                )
                stop(worker)
        assert collector.requests >= 1
    assert len(receiver.received) == count
    lines = json_lines(worker.err)
    sdk = [line for line in lines if str(line.get("logger")).startswith("opentelemetry")]
    assert 1 <= len(sdk) <= 4, sdk


# Run in a process of its own (OpenTelemetry's global provider is set once a process): a
# global tracer provider recording into memory, as `opentelemetry-instrument` or
# FASTAPI_OTEL_AUTO_CONFIGURE would set one; then requests to the app. Prints the names of
# the spans recorded.
GLOBAL_PROVIDER = """
import json, sys
from fastapi.testclient import TestClient
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from clubwire.web.app import create_app
from tests.conftest import make_settings

memory = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(memory))
trace.set_tracer_provider(provider)
settings = make_settings(sys.argv[1], sys.argv[2])
with TestClient(create_app(settings)) as client:
    assert client.get("/healthz").status_code == 200
    client.get("/clubs/granite/api/v1/programs?token=s3cret", headers={"traceparent": sys.argv[3]})
print(json.dumps([span.name for span in memory.get_finished_spans()]))
"""


def test_fastapis_own_spans_stay_off_when_a_global_provider_is_set(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """FastAPI would make spans of its own (recording the query string, continuing any
    caller's trace) once anything sets OpenTelemetry's global provider: clubwire keeps them
    off; its own spans need no global provider."""
    url = sqlite_database(sqlite_template, tmp_path)
    assert script(GLOBAL_PROVIDER, tmp_path, url, str(tmp_path), TRACEPARENT) == []
