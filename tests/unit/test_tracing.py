"""When tracing starts, and what it costs when it does not: ``clubwire.tracing``'s facade."""

from __future__ import annotations

import logging
import time

import pytest
from opentelemetry import trace as otel_trace

from clubwire import logs, tracing
from clubwire.domain.trace_context import TraceContext
from clubwire.tracing import spans
from tests.logcapture import capturing

ENDPOINT = "http://127.0.0.1:4318"


@pytest.mark.parametrize(
    ("environ", "wanted"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": ENDPOINT + "/v1/traces"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "  "}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "TRUE"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_SDK_DISABLED": "false"}, True),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "none"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": ENDPOINT, "OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_SERVICE_NAME": "clubwire"}, False),
    ],
)
def test_the_standard_variables_say_whether_to_trace(
    environ: dict[str, str], wanted: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert tracing.wanted(environ) is wanted
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    try:
        assert tracing.start("serve") is wanted
    finally:
        tracing.stop()


def test_untraced_every_span_is_one_shared_object_that_does_nothing() -> None:
    assert not tracing.on()
    assert tracing.current() is None
    with tracing.publishing("payment.completed", "club_1") as published:
        published.published("evt_1", 2, repeated=False)
    with tracing.serving("GET", "/", [], continued=True) as served:
        served.ended(200, "/")
    assert {id(published), id(served)} == {id(tracing.NOT_TRACED.__enter__())}
    assert tracing.recording([]) is tracing.NOT_TRACED


def test_a_refused_variable_says_so_in_one_line_and_leaves_tracing_off(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ENDPOINT)
    monkeypatch.setenv("OTEL_BSP_MAX_QUEUE_SIZE", "10")
    monkeypatch.setenv("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", "1000")
    with capturing(monkeypatch, "info") as captured:
        assert not tracing.start("worker")
    assert not tracing.on()
    (line,) = captured.lines()
    assert line["level"] == "error"
    assert line["message"].startswith("tracing is off: OpenTelemetry refused its settings (")


def test_log_lines_in_a_span_carry_its_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")  # nothing is sent
    with capturing(monkeypatch, "info") as captured:
        assert tracing.start("worker")
        try:
            logs.event("outside", {})
            with tracing.publishing("game.updated", "club_1"):
                logs.event("inside", {"n": 1})
                logging.getLogger("clubwire.test").warning("inside too")
                context = tracing.current()
        finally:
            tracing.stop()
    outside, inside, record = captured.lines()
    assert "trace_id" not in outside
    assert context is not None
    _, trace_id, span_id, flags = context.traceparent.split("-")
    assert int(flags, 16) & 1 == 0  # not sampled: still a context, carried on
    for line in (inside, record):
        assert (line["trace_id"], line["span_id"]) == (trace_id, span_id)


def test_the_sdks_complaints_come_once_a_minute_each(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = iter([0.0, 1.0, 2.0, 61.0])
    monkeypatch.setattr(time, "monotonic", lambda: next(clock))
    once = spans._OncePerMinute()

    def said(message: str) -> bool:
        return once.filter(logging.LogRecord("otel", logging.WARNING, "", 0, message, (), None))

    assert [said("Queue full"), said("Queue full"), said("Export failed"), said("Queue full")] == [
        True,
        False,
        True,
        True,
    ]


def test_another_protocol_asked_for_is_named_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    with capturing(monkeypatch, "info") as captured:
        try:
            assert tracing.start("worker")
        finally:
            tracing.stop()
    (line,) = captured.lines()
    assert line["level"] == "warning"
    assert line["message"] == (
        "OTEL_EXPORTER_OTLP_PROTOCOL=grpc is not followed: spans go by OTLP/HTTP (http/protobuf)"
    )


@pytest.mark.parametrize(
    "stored",
    [
        "garbage",
        "00-" + "0" * 32 + "-00f067aa0ba902b7-01",
        "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-more",
        "00-not-hex-01",
    ],
)
def test_a_stored_context_not_of_clubwires_shape_begins_a_trace(stored: str) -> None:
    assert spans._continued(TraceContext(stored)) is None


def test_a_stored_context_is_continued_as_it_was_written() -> None:
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    continued = spans._continued(TraceContext(parent, "a=1,b=2"))
    assert continued is not None
    span = otel_trace.get_current_span(continued)
    assert spans._context_of(span) == TraceContext(parent, "a=1,b=2")
