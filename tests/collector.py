"""A real OTLP/HTTP trace collector for tests: an aiohttp server in a thread of its own that
decodes what OpenTelemetry's exporter sends (``ExportTraceServiceRequest``, protobuf) with
OpenTelemetry's own proto package, and keeps each span as a plain ``Collected``.

A test points ``OTEL_EXPORTER_OTLP_ENDPOINT`` at ``url``; ``hang`` makes it never answer (a
collector that is slow or stuck), ``status`` answers exports with another status.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from aiohttp import web
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span, Status

from tests import receiver


@dataclass(frozen=True)
class Collected:
    """One span as it arrived: ids in hex (``parent_id`` empty for a root), its kind and
    status as the proto names them (``SPAN_KIND_SERVER``, ``STATUS_CODE_ERROR``)."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: str
    status: str
    attributes: dict[str, object]
    resource: dict[str, object]
    start_ns: int
    end_ns: int


@dataclass
class Collector:
    url: str = ""  # what OTEL_EXPORTER_OTLP_ENDPOINT names (its path is /v1/traces)
    status: int = 200
    hang: bool = False
    spans: list[Collected] = field(default_factory=list)
    requests: int = 0
    arrived: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(
        self, done: Callable[[list[Collected]], bool], timeout: float = 20.0
    ) -> list[Collected]:
        """Block until ``done(spans)`` holds; fails the test after ``timeout``."""
        with self.arrived:
            held = self.arrived.wait_for(lambda: done(self.spans), timeout)
            found = list(self.spans)
        assert held, f"the spans that came ({len(found)}) never did: {[s.name for s in found]}"
        return found

    def named(self, name: str) -> list[Collected]:
        with self.arrived:
            return [span for span in self.spans if span.name == name]

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        with self.arrived:
            self.requests += 1
        if self.hang:
            await asyncio.sleep(3600)
        if request.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        export = ExportTraceServiceRequest()
        export.ParseFromString(body)
        with self.arrived:
            self.spans += list(_spans_of(export))
            self.arrived.notify_all()
        answer = ExportTraceServiceResponse().SerializeToString()
        return web.Response(status=self.status, body=answer, content_type="application/x-protobuf")


def _spans_of(export: ExportTraceServiceRequest) -> Iterator[Collected]:
    for resource_spans in export.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield Collected(
                    span.trace_id.hex(),
                    span.span_id.hex(),
                    span.parent_span_id.hex(),
                    span.name,
                    Span.SpanKind.Name(span.kind),
                    Status.StatusCode.Name(span.status.code),
                    _attributes(span.attributes),
                    resource,
                    span.start_time_unix_nano,
                    span.end_time_unix_nano,
                )


def _attributes(pairs: Iterable[KeyValue]) -> dict[str, object]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> object:
    which = value.WhichOneof("value")
    return None if which is None else getattr(value, which)


@contextmanager
def collecting(**answers: object) -> Iterator[Collector]:
    """A collector listening on 127.0.0.1 until the block ends."""
    collector = Collector(**answers)  # type: ignore[arg-type]
    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/traces", collector.handle)
    with receiver.in_a_thread(app) as port:
        collector.url = f"http://127.0.0.1:{port}"
        yield collector
