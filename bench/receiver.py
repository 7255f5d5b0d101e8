"""The receiver the delivery benchmark posts to, in a process of its own, and the handle on it.

``start_receiver`` runs this file as ``bench/receiver.py --cert … --control … --ports …``: a
raw HTTP/1.1 protocol on uvloop over TLS, one port per role (as separate hosts would be),
answering ``200 ok``, except on the silent role's path, where it reads each request and never
answers, on the failing role's, where it answers ``503`` to every request, and on the
throttling role's, where it answers ``429`` to every other request. It records the
first arrival time of each ``X-Service-Delivery`` id, counts the arrivals of an id already
seen (duplicates), counts the inversions (a delivery whose envelope ``sequence`` is lower
than one already received for its ``orderingKey`` on the same path; both read from the body
with two ``find``s, not parsed as JSON, so that the receiver stays lean), and reports through a
plain HTTP control port (``GET /counts``, ``GET /arrivals``, ``GET /duplicates``,
``GET /inversions``, ``POST /reset``), which ``Receiver`` calls from the benchmark's process.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import ssl
import sys
import time
from collections import defaultdict
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, cast

import orjson
import uvloop

from harness import HOST, Process, call, free_ports, start, wait_answering

PROG = "bench/receiver.py"
# Roles besides healthy e0, e1, …
LIGHT, SILENT, FAILING, THROTTLING = "light", "silent", "failing", "throttling"
SILENT_PATH, FAILING_PATH, THROTTLING_PATH = f"/{SILENT}", f"/{FAILING}", f"/{THROTTLING}"

OK_RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\n\r\nok"
UNAVAILABLE_RESPONSE = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
    b"Content-Length: 11\r\n\r\nunavailable"
)
TOO_MANY_RESPONSE = (
    b"HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\nContent-Length: 4\r\n\r\nbusy"
)


# -- the receiver (its own process) -----------------------------------------------------------


class Place(NamedTuple):
    """An envelope's ordering key and sequence, as they are in its bytes."""

    key: bytes
    sequence: int


_KEY_FIELD = b'"orderingKey":"'
_SEQUENCE_FIELD = b'"sequence":'


def place_of(body: bytes) -> Place | None:
    """The ordering key and sequence of an envelope (``event_catalog.envelope``: compact JSON,
    the sequence right after the key and followed by ``data``), found without parsing the
    JSON; None for a body without them (a ping)."""
    at = body.find(_KEY_FIELD)
    if at < 0:
        return None
    start = at + len(_KEY_FIELD)
    stop = body.find(b'"', start)
    number = body.find(_SEQUENCE_FIELD, stop)
    if stop < 0 or number < 0:
        return None
    number += len(_SEQUENCE_FIELD)
    try:
        return Place(body[start:stop], int(body[number : body.find(b",", number)]))
    except ValueError:
        return None


@dataclass
class Arrivals:
    """What reached the receiver: per path, the first arrival (``time.time()``) of each
    delivery id, how many arrivals were of an id already seen, the highest sequence received
    of each ordering key, and how many first arrivals came after a higher one of their key
    (inversions)."""

    first: defaultdict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))
    again: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))
    highest: defaultdict[str, dict[bytes, int]] = field(default_factory=lambda: defaultdict(dict))
    inverted: defaultdict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, path: str, delivery: str, at: float, place: Place | None = None) -> int:
        """Record an arrival; how many requests the path has had, this one included."""
        arrived = self.first[path]
        if delivery in arrived:
            self.again[path] += 1
        else:
            arrived[delivery] = at
            if place is not None:
                self._in_order(path, place)
        return len(arrived) + self.again[path]

    def _in_order(self, path: str, place: Place) -> None:
        """Count an inversion if a higher sequence of the key already arrived on the path."""
        highest = self.highest[path]
        if place.sequence < highest.get(place.key, 0):
            self.inverted[path] += 1
        else:
            highest[place.key] = place.sequence

    def counts(self) -> dict[str, int]:
        return {path: len(ids) for path, ids in self.first.items()}

    def clear(self) -> None:
        self.first.clear()
        self.again.clear()
        self.highest.clear()
        self.inverted.clear()


class Request(NamedTuple):
    method: bytes
    path: str
    head: bytes
    lowered: bytes  # the head in lower case, to find header names in
    body: bytes


def take_request(buffer: bytearray) -> Request | None:
    """The first complete request in ``buffer``, removed from it; None while incomplete."""
    end = buffer.find(b"\r\n\r\n")
    if end < 0:
        return None
    head = bytes(buffer[:end])
    lowered = head.lower()
    total = end + 4 + int(header(head, lowered, b"content-length") or b"0")
    if len(buffer) < total:
        return None
    body = bytes(buffer[end + 4 : total])
    del buffer[:total]
    method, _, rest = head.partition(b"\r\n")[0].partition(b" ")
    return Request(method, rest.partition(b" ")[0].decode("latin-1"), head, lowered, body)


def header(head: bytes, lowered: bytes, name: bytes) -> bytes | None:
    """The value of header ``name`` (lower case), or None."""
    at = lowered.find(b"\r\n" + name + b":")
    if at < 0:
        return None
    start = at + len(name) + 3
    stop = head.find(b"\r\n", start)
    return head[start : stop if stop >= 0 else len(head)].strip()


class Hooks(asyncio.Protocol):
    """One sender's connection: record each request; answer 200, 503 on ``/failing``, 429 to
    every other request on ``/throttling``, or never on ``/silent``."""

    def __init__(self, arrivals: Arrivals) -> None:
        self._arrivals = arrivals
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None
        self._silent = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        now = time.time()
        self._buffer += data
        while (request := take_request(self._buffer)) is not None:
            delivery = header(request.head, request.lowered, b"x-service-delivery") or b"-"
            place = place_of(request.body)
            number = self._arrivals.add(request.path, delivery.decode("latin-1"), now, place)
            self._silent = self._silent or request.path == SILENT_PATH
            if not self._silent and self._transport is not None:
                self._transport.write(answer(request.path, number))


def answer(path: str, number: int) -> bytes:
    """The answer to the path's ``number``-th request (from 1)."""
    if path == FAILING_PATH:
        return UNAVAILABLE_RESPONSE
    if path == THROTTLING_PATH and number % 2:
        return TOO_MANY_RESPONSE
    return OK_RESPONSE


class Control(asyncio.Protocol):
    """Plain HTTP for the benchmark: ``GET /counts``, ``GET /arrivals``, ``GET /duplicates``,
    ``GET /inversions``, ``POST /reset``."""

    def __init__(self, arrivals: Arrivals) -> None:
        self._arrivals = arrivals
        self._buffer = bytearray()
        self._transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        request = take_request(self._buffer)
        if request is None or self._transport is None:
            return
        status, body = self._answer(request)
        self._transport.write(
            f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
            + body
        )
        self._transport.close()

    def _answer(self, request: Request) -> tuple[str, bytes]:
        if request.path == "/counts":
            return "200 OK", orjson.dumps(self._arrivals.counts())
        if request.path == "/arrivals":
            return "200 OK", orjson.dumps(self._arrivals.first)
        if request.path == "/duplicates":
            return "200 OK", orjson.dumps(self._arrivals.again)
        if request.path == "/inversions":
            return "200 OK", orjson.dumps(self._arrivals.inverted)
        if request.path == "/reset" and request.method == b"POST":
            self._arrivals.clear()
            return "200 OK", b"{}"
        return "404 Not Found", b"{}"


async def serve_receiver(cert: Path, control: int, ports: list[int]) -> None:
    """Serve until SIGTERM or SIGINT."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert)
    arrivals = Arrivals()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    servers = [
        await loop.create_server(lambda: Hooks(arrivals), HOST, port, ssl=context, backlog=1024)
        for port in ports
    ]
    servers.append(await loop.create_server(lambda: Control(arrivals), HOST, control))
    await stop.wait()
    for server in servers:
        server.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG)
    parser.add_argument("--cert", type=Path, required=True, help="key and certificate chain")
    parser.add_argument("--control", type=int, required=True, help="plain HTTP control port")
    parser.add_argument("--ports", required=True, help="TLS ports, separated by commas")
    args = parser.parse_args(argv)
    ports = [int(port) for port in args.ports.split(",")]
    uvloop.run(serve_receiver(args.cert, args.control, ports))
    return 0


# -- the benchmark's handle on it -------------------------------------------------------------


@dataclass(frozen=True)
class Receiver:
    """The receiver process, its control port and one TLS port per role."""

    process: Process
    control: int
    ports: dict[str, int]

    def url(self, role: str) -> str:
        return f"https://{HOST}:{self.ports[role]}/{role}"

    def counts(self) -> dict[str, int]:
        """Distinct deliveries that arrived, by role."""
        return {path[1:]: n for path, n in orjson.loads(self._call("GET", "/counts")).items()}

    def arrivals(self) -> dict[str, dict[str, float]]:
        """By role: each delivery id's first arrival time."""
        found = orjson.loads(self._call("GET", "/arrivals"))
        return {path[1:]: times for path, times in found.items()}

    def duplicates(self) -> dict[str, int]:
        """By role: arrivals of a delivery id that had arrived before."""
        return {path[1:]: n for path, n in orjson.loads(self._call("GET", "/duplicates")).items()}

    def inversions(self) -> dict[str, int]:
        """By role: deliveries that arrived after a higher sequence of their ordering key."""
        found = orjson.loads(self._call("GET", "/inversions")).items()
        return {path[1:]: n for path, n in found}

    def reset(self) -> None:
        self._call("POST", "/reset")

    def _call(self, method: str, path: str) -> bytes:
        return call(self.control, method, path)


def start_receiver(stack: ExitStack, workdir: Path, cert: Path, roles: list[str]) -> Receiver:
    """Start the receiver and wait until its control port answers."""
    control, *ports = free_ports(len(roles) + 1)
    command = [sys.executable, str(Path(__file__).resolve()), "--cert", str(cert)]
    command += ["--control", str(control), "--ports", ",".join(map(str, ports))]
    process = start(stack, command, dict(os.environ), workdir / "receiver.log")
    receiver = Receiver(process, control, dict(zip(roles, ports, strict=True)))
    wait_answering(process, receiver.counts, "the receiver")
    return receiver


def healthy_roles(count: int) -> list[str]:
    return [f"e{number}" for number in range(count)]


def busy_roles(healthy: int) -> list[str]:
    """The roles of ``testbed.seed``'s clubs: the healthy ones, light, and the busy club's
    neighbours (``testbed.NEIGHBOURS``)."""
    return [*healthy_roles(healthy), LIGHT, SILENT, THROTTLING]


if __name__ == "__main__":
    sys.exit(main())
