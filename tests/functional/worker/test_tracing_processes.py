"""Traces from real processes (issue 36): ``clubwire serve``, ``clubwire worker`` and
``clubwire demo`` started as the operator starts them, with the OTEL variables pointing at a
real OTLP/HTTP collector (``tests.collector``), delivering to a real TLS receiver.

What the in-process tests (``test_tracing.py``) cannot show: the spans of two processes join
in one trace through the event the database keeps; each process names itself in its
resource; the worker's log lines on standard error carry the trace's ids; and a process
stopped by SIGTERM sends its last spans before it exits 0.
"""

from __future__ import annotations

import shutil
import signal
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import orjson
import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire.storage import database
from tests.collector import Collected, Collector, collecting
from tests.conftest import PLATFORM_TOKEN, make_settings
from tests.factories import registration
from tests.functional.processes import Clubwire, clubwire, environment, wait_for
from tests.functional.workers import READY, add_endpoint, worker_environment
from tests.ports import free_port
from tests.receiver import Receiver, authority, serving

pytestmark = pytest.mark.slow

PLATFORM_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
PLATFORM_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{PLATFORM_TRACE}-{PLATFORM_SPAN}-01"
KIND = "registration.created"
SERVED = "POST /internal/v1/clubs/{slug}/events"
DELIVERED = f"deliver {KIND}"


def traced(env: dict[str, str], collector: Collector, **variables: str) -> dict[str, str]:
    """``env`` without the OTEL variables of whoever runs the tests, asking for traces to
    ``collector``, exported every 100 ms."""
    env = {name: value for name, value in env.items() if not name.startswith("OTEL_")}
    return {
        **env,
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        **variables,
    }


def publish(port: int, **headers: str) -> str:
    """One registration.created through the internal API of the server on ``port``; its id."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/internal/v1/clubs/granite/events",
        orjson.dumps({"event": KIND, "data": registration()}),
        {
            "Authorization": f"Bearer {PLATFORM_TOKEN}",
            "Content-Type": "application/json",
            **headers,
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as answer:
        assert answer.status == 201
        event_id: str = orjson.loads(answer.read())["id"]
        return event_id


def serve(stack: ExitStack, folder: Path, env: dict[str, str]) -> tuple[Clubwire, int]:
    """A ready ``clubwire serve``, and its port."""
    port = free_port()
    process = stack.enter_context(clubwire(folder, env, "serve", "--port", str(port)))
    wait_for(f"http://127.0.0.1:{port}/readyz", {})
    return process, port


def stop(process: Clubwire) -> None:
    """SIGTERM: a graceful stop, exit 0, nothing gone wrong on the way."""
    process.process.send_signal(signal.SIGTERM)
    assert process.process.wait(30) == 0, process.err
    assert "Traceback" not in process.err, process.err


def one(spans: list[Collected], name: str) -> Collected:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, [(span.name, span.span_id) for span in spans]
    return found[0]


def event_lines(err: str, event: str) -> list[dict[str, object]]:
    """Standard error's event lines of the kind ``event`` (``attempt``, ``request``)."""
    lines = [orjson.loads(line) for line in err.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("event") == event]


def sqlite_database(sqlite_template: Path, folder: Path) -> str:
    """A migrated SQLite database of the test's own, in ``folder``; its URL."""
    shutil.copyfile(sqlite_template, folder / "clubwire.db")
    return f"sqlite:///{folder / 'clubwire.db'}"


@contextmanager
def club(url: str, home: Path, receiver: Receiver) -> Iterator[sessionmaker[Session]]:
    """The database's sessions, with granite and an endpoint of it for ``KIND`` at
    ``receiver`` in it."""
    settings = make_settings(url, home, allow_private_targets=True)
    engine = database.engine_for(settings)
    try:
        sessions = database.sessions(engine)
        add_endpoint(sessions, settings, receiver.url)
        yield sessions
    finally:
        engine.dispose()


def assert_one_delivery_traced(
    spans: list[Collected], receiver: Receiver, event_id: str
) -> dict[str, Collected]:
    """The trace of the platform's publish holds the request, the publish, one attempt, its
    POST and its record, each the child of the one before (the record, the attempt's); the
    receiver was sent the POST's span. The spans by name."""
    spans = [span for span in spans if span.trace_id == PLATFORM_TRACE]
    named = {name: one(spans, name) for name in (SERVED, f"publish {KIND}", DELIVERED, "POST")}
    named["record"] = one(spans, "record")
    parent = PLATFORM_SPAN
    for span in named.values():
        assert span.parent_id == parent, (span.name, span.parent_id, parent)
        parent = named[DELIVERED].span_id if span.name == "POST" else span.span_id
    assert named[f"publish {KIND}"].attributes["clubwire.event.id"] == event_id
    assert named[DELIVERED].attributes["clubwire.delivery.outcome"] == "succeeded"
    (arrived,) = receiver.received
    assert arrived.headers["traceparent"] == f"00-{PLATFORM_TRACE}-{named['POST'].span_id}-01"
    return named


def test_serve_and_worker_write_one_trace_on_postgresql(
    postgres_database: str, tmp_path: Path
) -> None:
    """The request and the publish come from serve, the attempt, its POST and its record
    from the worker: one trace. Both processes export only when they stop (a delay of a
    minute), so that every span proves that SIGTERM sends what waits before the exit."""
    tls = authority(tmp_path)
    with collecting() as collector, serving(tls) as receiver, ExitStack() as stack:
        stack.enter_context(club(postgres_database, tmp_path, receiver))
        env = worker_environment(
            postgres_database, tls.bundle, CLUBWIRE_PLATFORM_TOKEN=PLATFORM_TOKEN
        )
        env = traced(env, collector, OTEL_BSP_SCHEDULE_DELAY="60000")
        worker = stack.enter_context(clubwire(tmp_path, env, "worker"))
        server, port = serve(stack, tmp_path, env)
        worker.until(lambda err: READY in err, "worker ready", stream="err")

        event_id = publish(port, traceparent=TRACEPARENT)
        receiver.wait_for(1)
        worker.until(lambda err: event_lines(err, "attempt"), "an attempt line", stream="err")
        assert collector.requests == 0
        stop(worker)
        stop(server)
        spans = list(collector.spans)  # sent before the processes exited

    named = assert_one_delivery_traced(spans, receiver, event_id)
    for name, span in named.items():
        role = "serve" if name in (SERVED, f"publish {KIND}") else "worker"
        assert (span.resource["clubwire.role"], span.resource["service.name"]) == (
            role,
            "clubwire",
        ), name
    (line,) = event_lines(worker.err, "attempt")
    assert (line["trace_id"], line["span_id"]) == (PLATFORM_TRACE, named[DELIVERED].span_id)
    (line,) = [line for line in event_lines(server.err, "request") if line["method"] == "POST"]
    assert (line["trace_id"], line["span_id"]) == (PLATFORM_TRACE, named[SERVED].span_id)


def test_serve_alone_writes_the_whole_trace_on_sqlite(
    sqlite_template: Path, tmp_path: Path
) -> None:
    """On SQLite serve delivers too: every span is serve's, named as OTEL_SERVICE_NAME says."""
    url = sqlite_database(sqlite_template, tmp_path)
    tls = authority(tmp_path)
    with collecting() as collector, serving(tls) as receiver, ExitStack() as stack:
        stack.enter_context(club(url, tmp_path, receiver))
        env = worker_environment(url, tls.bundle, CLUBWIRE_PLATFORM_TOKEN=PLATFORM_TOKEN)
        env = traced(env, collector, OTEL_SERVICE_NAME="club-hooks")
        server, port = serve(stack, tmp_path, env)
        event_id = publish(port, traceparent=TRACEPARENT)
        spans = collector.wait_for(lambda spans: any(s.name == "record" for s in spans))
        stop(server)

    named = assert_one_delivery_traced(spans, receiver, event_id)
    assert {(s.resource["clubwire.role"], s.resource["service.name"]) for s in named.values()} == {
        ("serve", "club-hooks")
    }


def test_the_demo_traces_what_it_publishes_and_delivers(tmp_path: Path) -> None:
    """``make demo`` with the variables set: its events' traces, from the publish (a root:
    no request comes before it) to the record, each span the demo's."""

    def traces(spans: list[Collected]) -> list[tuple[Collected, Collected, Collected]]:
        """Each record there with its attempt and its publish."""
        by_id = {span.span_id: span for span in spans}
        found = []
        for record in (span for span in spans if span.name == "record"):
            attempt = by_id.get(record.parent_id)
            published = attempt and by_id.get(attempt.parent_id)
            if attempt is not None and published is not None:
                found.append((published, attempt, record))
        return found

    with collecting() as collector:
        # Its receiver is slow now and then (2 to 4 s): a stop then waits for the attempt
        # in flight, for 1 s at most here.
        env = traced(environment(tmp_path / "home", CLUBWIRE_ATTEMPT_TIMEOUT="1"), collector)
        port = str(free_port())
        with clubwire(tmp_path, env, "demo", "--port", port, "--interval", "0.1") as demo:
            spans = collector.wait_for(lambda spans: bool(traces(spans)))
            assert demo.interrupt() == 0, demo.err
        assert demo.out.rstrip().endswith("clubwire demo: stopped."), demo.out
        assert "Traceback" not in demo.err, demo.err

    published, attempt, record = traces(spans)[0]
    assert (published.kind, published.parent_id) == ("SPAN_KIND_PRODUCER", "")
    assert published.name == f"publish {published.attributes['clubwire.event.kind']}"
    assert attempt.name == f"deliver {published.attributes['clubwire.event.kind']}"
    assert {record.trace_id, attempt.trace_id} == {published.trace_id}
    assert {(s.resource["clubwire.role"], s.resource["service.name"]) for s in spans} == {
        ("demo", "clubwire")
    }
