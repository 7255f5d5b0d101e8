"""W3C Trace Context (https://www.w3.org/TR/trace-context/) as clubwire keeps and sends it: a
``traceparent`` and, where there is one, a ``tracestate``, as text.

An event keeps the context it was published in; every attempt of its deliveries continues
it and sends its own (``clubwire.tracing``, ADR 0018). This module holds only the format:
which headers carry it, and a ``tracestate`` cut to what the event's column keeps, as the
specification says a vendor may cut one (entries longer than 128 characters go first, then
entries from the end).
"""

from __future__ import annotations

from typing import NamedTuple

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
STATE_LIMIT = 512  # characters of a tracestate kept (the specification asks for at least 512)
_LONG_ENTRY = 128


class TraceContext(NamedTuple):
    traceparent: str
    tracestate: str | None = None

    def headers(self) -> dict[str, str]:
        """The context as the headers of a request it travels with."""
        if not self.tracestate:
            return {TRACEPARENT: self.traceparent}
        return {TRACEPARENT: self.traceparent, TRACESTATE: self.tracestate}


def of(traceparent: str | None, tracestate: str | None = None) -> TraceContext | None:
    """The context stored as these two columns (None: no trace)."""
    return None if traceparent is None else TraceContext(traceparent, tracestate)


def kept_state(tracestate: str | None) -> str | None:
    """``tracestate`` cut to at most ``STATE_LIMIT`` characters by whole entries (None:
    nothing left)."""
    if not tracestate or len(tracestate) <= STATE_LIMIT:
        return tracestate or None
    entries = [entry.strip() for entry in tracestate.split(",") if entry.strip()]
    entries = [entry for entry in entries if len(entry) <= _LONG_ENTRY]
    while entries and len(",".join(entries)) > STATE_LIMIT:
        entries.pop()
    return ",".join(entries) or None
