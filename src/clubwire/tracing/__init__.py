"""Traces of what clubwire does, in OpenTelemetry, when the operator asks for them (ADR 0018).

Tracing starts (``start``, called by ``serve``, ``worker`` and ``demo``) when the standard
variables ask for it: ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or ``OTEL_EXPORTER_OTLP_ENDPOINT``
set, ``OTEL_SDK_DISABLED`` not ``true`` and ``OTEL_TRACES_EXPORTER`` not ``none``; spans then
go over OTLP/HTTP by the SDK's own exporter (``spans``, the one module that imports
OpenTelemetry, which is an extra: ``pip install 'clubwire[otel]'``). Otherwise nothing is
imported, and each function here hands back a shared object that does nothing, so the hot
paths pay a call and no more.

One trace per event: the publish is a span (continuing the platform's ``traceparent`` on the
internal API), the event keeps its context (``current``), and every attempt of every delivery
of it is a span of that trace, with its HTTP request and its record beneath it.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from clubwire import logs
from clubwire.domain.delivering import Job, Outcome, Result
from clubwire.domain.trace_context import TraceContext

if TYPE_CHECKING:
    from clubwire.tracing.spans import Tracing

log = logging.getLogger(__name__)

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
EXTRA = "pip install 'clubwire[otel]'"
PROTOCOL = "http/protobuf"
PROTOCOL_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


class Served(Protocol):
    """A request's span, told how the request ended and the route that answered it (the
    framework's route object, whose ``path`` is its template; None: none)."""

    def ended(self, status: int, route: object) -> None: ...


class Published(Protocol):
    """A publish's span, told what it made."""

    def published(self, event_id: str, deliveries: int, repeated: bool) -> None: ...


class Attempted(Protocol):
    """An attempt's span: its HTTP request's span begins with ``post_headers`` (the headers
    that carry it to the receiver) and ends with ``answered``; ``judged`` tells the
    attempt's outcome; ``context`` is what its record continues. ``error`` is the attempt's
    error in words, which may quote the receiver (``quoted``: its words, left out)."""

    @property
    def context(self) -> TraceContext | None: ...

    def post_headers(self, url: str) -> Mapping[str, str]: ...

    def answered(self, status: int | None, error: str | None, quoted: str | None) -> None: ...

    def judged(self, outcome: Outcome) -> None: ...


class _Untraced:
    """What every span is while tracing is off: nothing."""

    context = None

    def ended(self, status: int, route: object) -> None:
        pass

    def answered(self, status: int | None, error: str | None, quoted: str | None) -> None:
        pass

    def published(self, event_id: str, deliveries: int, repeated: bool) -> None:
        pass

    def post_headers(self, url: str) -> Mapping[str, str]:  # noqa: ARG002
        return NO_HEADERS

    def judged(self, outcome: Outcome) -> None:
        pass


NO_HEADERS: Mapping[str, str] = {}  # what an untraced request is sent
# What every span is while tracing is off, and what is never traced.
NOT_TRACED: nullcontext[_Untraced] = nullcontext(_Untraced())


class _State:
    tracing: Tracing | None = None


_state = _State()


def wanted(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the standard variables ask for traces."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OTEL_TRACES_EXPORTER", "otlp").strip().lower() == "none":
        return False
    return any(environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


def start(role: str) -> bool:
    """Trace this process (``role``: serve, worker or demo) if the variables ask for it and
    the extra is installed; whether it is traced. Tracing never stops a process: without
    the extra, or with a variable the SDK refuses, it says so in one line and runs untraced."""
    if _state.tracing is not None:
        return True
    if not wanted():
        return False
    _warn_of_another_protocol()
    try:
        from clubwire.tracing import spans
    except ImportError:
        log.warning(
            "%s is set but OpenTelemetry is not installed (%s): no traces are sent",
            next(name for name in ENDPOINT_VARIABLES if os.environ.get(name, "").strip()),
            EXTRA,
        )
        return False
    try:
        _state.tracing = spans.Tracing.start(role)
    except ValueError as refused:  # a variable the SDK refuses (a queue size of 0, say)
        log.error("tracing is off: OpenTelemetry refused its settings (%s)", refused)
        return False
    logs.join_traces(_state.tracing.ids)
    return True


def _warn_of_another_protocol() -> None:
    """One line if the variables ask for a protocol other than the one spans go by."""
    for name in PROTOCOL_VARIABLES:
        asked = os.environ.get(name, "").strip()
        if asked and asked != PROTOCOL:
            log.warning("%s=%s is not followed: spans go by OTLP/HTTP (%s)", name, asked, PROTOCOL)
            return


def stop() -> None:
    """Send the spans still waiting (for a few seconds at most) and stop tracing."""
    tracing, _state.tracing = _state.tracing, None
    if tracing is not None:
        logs.join_traces(None)
        tracing.stop()


@contextmanager
def traced(role: str) -> Iterator[bool]:
    """This process traced while the block runs, if the variables ask for it (``start``);
    its last spans sent when it ends (``stop``)."""
    started = start(role)
    try:
        yield started
    finally:
        stop()


def on() -> bool:
    return _state.tracing is not None


def current() -> TraceContext | None:
    """The trace context of the span this runs in, as an event keeps it (None: none)."""
    tracing = _state.tracing
    return None if tracing is None else tracing.current()


def serving(
    method: str, path: str, headers: Sequence[tuple[bytes, bytes]], continued: bool
) -> AbstractContextManager[Served]:
    """A request's span (server side); it continues the caller's ``traceparent`` when
    ``continued`` (the platform's internal API), else begins a trace."""
    tracing = _state.tracing
    return NOT_TRACED if tracing is None else tracing.serving(method, path, headers, continued)


def publishing(kind: str, club_id: str) -> AbstractContextManager[Published]:
    """A publish's span, current while the event and its deliveries are written."""
    tracing = _state.tracing
    return NOT_TRACED if tracing is None else tracing.publishing(kind, club_id)


def attempting(job: Job, started: datetime) -> AbstractContextManager[Attempted]:
    """An attempt's span, in its event's trace, current while the attempt runs."""
    tracing = _state.tracing
    return NOT_TRACED if tracing is None else tracing.attempting(job, started)


def recording(results: Sequence[Result]) -> AbstractContextManager[object]:
    """A span for each result's record, beneath its attempt's span, while they are written."""
    tracing = _state.tracing
    return NOT_TRACED if tracing is None else tracing.recording(results)
