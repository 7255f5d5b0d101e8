"""The spans clubwire writes, with OpenTelemetry's SDK; imported only when tracing is on.

Names and attributes follow OpenTelemetry's semantic conventions for HTTP where they apply
(a request's span is ``{method} {route}``; an attempt's HTTP request is a client span
``POST`` with ``http.request.method``, ``server.address``, ``server.port``, ``url.scheme``,
``http.response.status_code`` and ``error.type``), and are clubwire's own (``clubwire.*``)
elsewhere. No span holds a secret, a body, a header's value, a query string or an endpoint's
path (receivers' URLs carry tokens in them): ``url.full`` is left out (ADR 0018).

Spans leave by the SDK's batch processor: a collector that is down or slow fills its queue,
and spans past it are dropped, never waited for. The SDK's complaints about that come at
most once a minute each (``_OncePerMinute``).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime

import yarl
from opentelemetry import context, trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TraceState,
)
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

import clubwire
from clubwire import logs
from clubwire.domain import event_catalog, trace_context
from clubwire.domain.delivering import Job, Outcome, Result
from clubwire.domain.trace_context import TraceContext

DEFAULT_SERVICE = "clubwire"
SHUTDOWN_WAIT = 5.0  # seconds a stopping process waits for its last spans to leave
COMPLAINTS_EVERY = 60.0  # seconds between two log lines of the SDK saying the same thing
_SERVER_ERROR = 500
_REDIRECT = 300
_HEADERS = {b"traceparent": "traceparent", b"tracestate": "tracestate"}
_propagator = TraceContextTextMapPropagator()


class Tracing:
    """A process's tracer, its spans sent in batches to the collector the variables name."""

    def __init__(self, provider: TracerProvider) -> None:
        self._provider = provider
        self._tracer = provider.get_tracer("clubwire", clubwire.__version__)

    @classmethod
    def start(cls, role: str) -> Tracing:
        """The SDK reads the standard variables: the collector's address, headers and
        timeout, the service's name and resource, and the sampler."""
        resource = Resource.create({"service.version": clubwire.__version__, "clubwire.role": role})
        if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
            resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE}))
        provider = TracerProvider(resource=resource)
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        _quieten_sdk()
        return cls(provider)

    def stop(self) -> None:
        """Send what waits, for ``SHUTDOWN_WAIT`` at most (a collector that does not answer
        keeps the rest)."""
        stopping = threading.Thread(target=self._provider.shutdown, daemon=True)
        stopping.start()
        stopping.join(SHUTDOWN_WAIT)

    # -- what logs and events keep -----------------------------------------------------------

    def ids(self) -> dict[str, object] | None:
        """The current span's ids, for a log line written in it."""
        found = trace.get_current_span().get_span_context()
        if not found.is_valid:
            return None
        return {"trace_id": f"{found.trace_id:032x}", "span_id": f"{found.span_id:016x}"}

    def current(self) -> TraceContext | None:
        return _context_of(trace.get_current_span())

    # -- spans --------------------------------------------------------------------------------

    @contextmanager
    def serving(
        self, method: str, path: str, headers: Sequence[tuple[bytes, bytes]], continued: bool
    ) -> Iterator[_Served]:
        parent = _extracted(headers) if continued else None
        with self._tracer.start_as_current_span(
            method, context=parent, kind=SpanKind.SERVER
        ) as span:
            if span.is_recording():
                span.set_attributes({"http.request.method": method, "url.path": path})
            yield _Served(span, method)

    @contextmanager
    def publishing(self, kind: str, club_id: str) -> Iterator[_Published]:
        with self._tracer.start_as_current_span(f"publish {kind}", kind=SpanKind.PRODUCER) as span:
            if span.is_recording():
                span.set_attributes({"clubwire.event.kind": kind, "clubwire.club.id": club_id})
            yield _Published(span)

    @contextmanager
    def attempting(self, job: Job, started: datetime) -> Iterator[_Attempted]:
        with self._tracer.start_as_current_span(
            f"deliver {job.kind}", context=_continued(job.trace), kind=SpanKind.CONSUMER
        ) as span:
            if span.is_recording():
                span.set_attributes(_attempt_attributes(job, started))
            attempted = _Attempted(self._tracer, span)
            try:
                yield attempted
            finally:
                attempted.end_post()

    @contextmanager
    def recording(self, results: Sequence[Result]) -> Iterator[object]:
        spans = [
            self._tracer.start_span(
                "record",
                context=_continued(result.trace),
                attributes={
                    "clubwire.delivery.id": result.job.delivery_id,
                    "clubwire.delivery.status": str(result.verdict.status),
                    "clubwire.record.batch": len(results),
                },
            )
            for result in results
            if result.trace is not None
        ]
        try:
            yield None
        except BaseException as error:
            for span in spans:
                span.set_status(Status(StatusCode.ERROR, type(error).__name__))
            raise
        finally:
            for span in spans:
                span.end()


def _attempt_attributes(job: Job, started: datetime) -> dict[str, str | int]:
    attributes: dict[str, str | int] = {
        "clubwire.delivery.id": job.delivery_id,
        "clubwire.event.id": event_catalog.id_of(job.body) or "",
        "clubwire.endpoint.id": job.endpoint_id,
        "clubwire.club.id": job.club_id,
        "clubwire.attempt": job.attempts_made + 1,
        "clubwire.trigger": str(job.trigger),
    }
    if job.due_at is not None:
        waited = max(0.0, (started - job.due_at).total_seconds())
        attributes["clubwire.queue.wait_ms"] = int(waited * 1000)
    return attributes


class _Served:
    def __init__(self, span: Span, method: str) -> None:
        self._span = span
        self._method = method

    def ended(self, status: int, route: object) -> None:
        span = self._span
        span.set_attribute("http.response.status_code", status)
        route = getattr(route, "path", None)  # the template (``/clubs/{slug}/api/v1/…``)
        if isinstance(route, str):
            span.set_attribute("http.route", route)
            span.update_name(f"{self._method} {route}")
        if status >= _SERVER_ERROR:
            span.set_attribute("error.type", str(status))
            span.set_status(StatusCode.ERROR)


class _Published:
    def __init__(self, span: Span) -> None:
        self._span = span

    def published(self, event_id: str, deliveries: int, repeated: bool) -> None:
        self._span.set_attributes(
            {
                "clubwire.event.id": event_id,
                "clubwire.deliveries": deliveries,
                "clubwire.event.repeated": repeated,
            }
        )


class _Attempted:
    """An attempt's span and, while its request is on its way, the request's."""

    def __init__(self, tracer: trace.Tracer, span: Span) -> None:
        self._tracer = tracer
        self._span = span
        self._post: Span | None = None
        self.context = _context_of(span)

    def post_headers(self, url: str) -> Mapping[str, str]:
        self._post = self._tracer.start_span(
            "POST", context=trace.set_span_in_context(self._span), kind=SpanKind.CLIENT
        )
        if self._post.is_recording():
            self._post.set_attributes(_server_of(url))
        found = _context_of(self._post)
        return {} if found is None else found.headers()

    def answered(self, status: int | None, error: str | None, quoted: str | None) -> None:
        post = self._post
        if post is None:
            return
        if status is not None:
            post.set_attribute("http.response.status_code", status)
        if status is not None and status >= _REDIRECT:  # not followed: a failure
            failed: str | None = str(status)  # a status as its type, as the conventions ask
        else:
            failed = logs.unquoted(error, quoted)  # a class of failure in a few words
        if failed is not None:
            post.set_attribute("error.type", failed)
            post.set_status(StatusCode.ERROR)
        self.end_post()

    def end_post(self) -> None:
        if self._post is not None:
            self._post.end()
            self._post = None

    def judged(self, outcome: Outcome) -> None:
        self._span.set_attribute("clubwire.delivery.outcome", str(outcome))
        if outcome is not Outcome.SUCCEEDED:
            self._span.set_status(StatusCode.ERROR)


@functools.lru_cache(maxsize=4096)
def _server_of(url: str) -> dict[str, str | int]:
    """A request's method and where it goes, as the conventions name them; never its path
    or query. Kept for each endpoint's URL (the span copies what it is given)."""
    try:
        parsed = yarl.URL(url)
    except ValueError:
        return {"http.request.method": "POST"}
    found: dict[str, str | int] = {"http.request.method": "POST", "url.scheme": parsed.scheme}
    if parsed.host is not None:
        found["server.address"] = parsed.host
    if parsed.port is not None:
        found["server.port"] = parsed.port
    return found


def _context_of(span: Span) -> TraceContext | None:
    """A span's context as W3C text: its ``traceparent`` and the ``tracestate`` it carries
    (written here, as the propagator writes them, at a fraction of its cost)."""
    found = span.get_span_context()
    if not found.is_valid:
        return None
    parent = f"00-{found.trace_id:032x}-{found.span_id:016x}-{found.trace_flags:02x}"
    state = found.trace_state.to_header() if found.trace_state else None
    return TraceContext(parent, trace_context.kept_state(state))


def _continued(stored: TraceContext | None) -> context.Context | None:
    """The context a stored ``traceparent`` names, to continue (None: none, or one not of
    the shape clubwire writes, which then begins a trace)."""
    if stored is None:
        return None
    try:
        version, trace_id, span_id, flags = stored.traceparent.split("-")
        found = SpanContext(
            int(trace_id, 16),
            int(span_id, 16),
            is_remote=True,
            trace_flags=TraceFlags(int(flags, 16)),
            trace_state=TraceState.from_header([stored.tracestate]) if stored.tracestate else None,
        )
    except ValueError:
        return None
    if version != "00" or not found.is_valid:
        return None
    return trace.set_span_in_context(NonRecordingSpan(found))


def _extracted(headers: Sequence[tuple[bytes, bytes]]) -> context.Context | None:
    """The caller's trace context from its request's headers (an invalid one is ignored:
    the request begins a trace)."""
    carrier = {
        _HEADERS[name]: value.decode("latin-1") for name, value in headers if name in _HEADERS
    }
    return _propagator.extract(carrier) if carrier else None


def _quieten_sdk() -> None:
    """Each of the SDK's loggers (made when their modules were imported, above) says each
    thing at most once a minute."""
    once = _OncePerMinute()
    for name, logger in list(logging.Logger.manager.loggerDict.items()):
        if name.startswith("opentelemetry") and isinstance(logger, logging.Logger):
            logger.addFilter(once)


class _OncePerMinute(logging.Filter):
    """Lets one line of each of the SDK's complaints through a minute: a collector that is
    down makes it say the same thing for every batch, and a full queue for every span."""

    def __init__(self) -> None:
        super().__init__()
        self._said: dict[object, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        now = time.monotonic()
        if now - self._said.get(record.msg, -COMPLAINTS_EVERY) < COMPLAINTS_EVERY:
            return False
        self._said[record.msg] = now
        return True
