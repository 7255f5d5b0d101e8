"""The OTLP/HTTP trace collector ``bench/tracing.py`` exports to, in a process of its own, and
the handle on it.

``start_collector`` runs this file as ``bench/otlp_collector.py --port …``: a minimal aiohttp
app answering ``200`` (an empty ``ExportTraceServiceResponse``) to every ``POST /v1/traces``,
as a collector that keeps up would. It counts the requests, their bytes and the spans in them
by the exporting process's role (the resource attribute ``clubwire.role``: bench, serve,
worker) and the first word of the span's name (``publish``, ``GET``, ``deliver``, ``POST``,
``record``), reading the protobuf's wire format itself (a few fields deep: ``resource_spans``
→ ``resource`` and ``scope_spans`` → ``spans`` → ``name``), so that it needs no
opentelemetry-proto. ``GET /counts`` tells the counts, ``POST /reset`` clears them. Its own
process, so that its CPU time is not the measured process's (it is the machine's: on two
cores it takes its share of them in the runs with tracing on).
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import orjson
from aiohttp import web

from harness import HOST, Process, call, free_ports, start, wait_answering

PROG = "bench/otlp_collector.py"
ROLE = b"clubwire.role"
UNKNOWN = "-"

# Field numbers of OTLP's trace protobuf (opentelemetry-proto, trace/v1 and common/v1).
RESOURCE_SPANS = 1  # ExportTraceServiceRequest.resource_spans
RESOURCE, SCOPE_SPANS = 1, 2  # ResourceSpans
ATTRIBUTES = 1  # Resource.attributes
KEY, VALUE = 1, 2  # KeyValue
STRING_VALUE = 1  # AnyValue.string_value
SPANS = 2  # ScopeSpans.spans
NAME = 5  # Span.name
_LENGTH_DELIMITED, _VARINT, _FIXED64, _FIXED32 = 2, 0, 1, 5


# -- the wire format --------------------------------------------------------------------------


def varint(data: bytes, at: int) -> tuple[int, int]:
    """The varint at ``at``, and where the next field begins."""
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, at
        shift += 7


def fields(data: bytes, wanted: int) -> Iterator[bytes]:
    """The length-delimited fields numbered ``wanted`` of a message, in order."""
    at = 0
    while at < len(data):
        key, at = varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == _LENGTH_DELIMITED:
            length, at = varint(data, at)
            if number == wanted:
                yield data[at : at + length]
            at += length
        elif wire == _VARINT:
            _, at = varint(data, at)
        elif wire in (_FIXED64, _FIXED32):
            at += 8 if wire == _FIXED64 else 4
        else:
            raise ValueError(f"wire type {wire} (groups) in a trace export")


def first(data: bytes, wanted: int) -> bytes:
    return next(fields(data, wanted), b"")


def role_of(resource: bytes) -> str:
    """The resource's ``clubwire.role``, or UNKNOWN."""
    for pair in fields(resource, ATTRIBUTES):
        if first(pair, KEY) == ROLE:
            return first(first(pair, VALUE), STRING_VALUE).decode() or UNKNOWN
    return UNKNOWN


def spans_of(export: bytes) -> Iterator[str]:
    """``<role> <first word of the name>`` of each span in an ``ExportTraceServiceRequest``."""
    for resource_spans in fields(export, RESOURCE_SPANS):
        role = role_of(first(resource_spans, RESOURCE))
        for scope_spans in fields(resource_spans, SCOPE_SPANS):
            for span in fields(scope_spans, SPANS):
                name = first(span, NAME).decode(errors="replace")
                yield f"{role} {name.split(' ', 1)[0]}"


# -- the collector (its own process) ----------------------------------------------------------


@dataclass
class Counts:
    """What arrived since the last reset: export requests, their bytes, spans by kind
    (``spans_of``)."""

    requests: int = 0
    size: int = 0  # bytes
    spans: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, export: bytes) -> None:
        self.requests += 1
        self.size += len(export)
        for kind in spans_of(export):
            self.spans[kind] += 1


def collector_app() -> web.Application:
    counts = Counts()

    async def export(request: web.Request) -> web.Response:
        counts.add(await request.read())  # aiohttp undoes a gzip Content-Encoding
        return web.Response(body=b"", content_type="application/x-protobuf")

    async def tell(_: web.Request) -> web.Response:
        found = {"requests": counts.requests, "bytes": counts.size, "spans": counts.spans}
        return web.Response(body=orjson.dumps(found), content_type="application/json")

    async def reset(_: web.Request) -> web.Response:
        counts.requests = counts.size = 0
        counts.spans.clear()
        return web.json_response({})

    app = web.Application(client_max_size=64 << 20)
    app.router.add_post("/v1/traces", export)
    app.router.add_get("/counts", tell)
    app.router.add_post("/reset", reset)
    return app


# -- the benchmark's handle on it -------------------------------------------------------------


@dataclass(frozen=True)
class Exported:
    """What the collector received: export requests, bytes, spans by ``<role> <kind>``."""

    requests: int
    bytes: int
    spans: dict[str, int]


# Where a collector that is down would be: nothing listens on the discard port here, so
# every export is refused at once.
DOWN_PORT = 9


@dataclass(frozen=True)
class Collector:
    """``down``: the traced processes are told to send elsewhere, where nothing listens (a
    collector that is down); this one then receives nothing, and every span counts as
    dropped."""

    process: Process
    port: int
    down: bool = False

    def environment(self) -> dict[str, str]:
        """The variables that send a process's traces here, every trace sampled."""
        port = DOWN_PORT if self.down else self.port
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://{HOST}:{port}",
            "OTEL_TRACES_SAMPLER": "always_on",
        }

    def counts(self) -> Exported:
        found = orjson.loads(call(self.port, "GET", "/counts"))
        return Exported(found["requests"], found["bytes"], found["spans"])

    def reset(self) -> None:
        call(self.port, "POST", "/reset")


def start_collector(stack: ExitStack, workdir: Path, env: dict[str, str]) -> Collector:
    """Start the collector and wait until it answers."""
    (port,) = free_ports(1)
    command = [sys.executable, str(Path(__file__).resolve()), "--port", str(port)]
    collector = Collector(start(stack, command, env, workdir / "collector.log"), port)
    wait_answering(collector.process, collector.counts, "the OTLP collector")
    return collector


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args(argv)
    web.run_app(collector_app(), host=HOST, port=args.port, print=None, access_log=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
