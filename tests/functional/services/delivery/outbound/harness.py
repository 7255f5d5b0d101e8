"""Raw asyncio receivers that misbehave on purpose, and shared helpers.

A ``Receiver`` listens on a free local port and counts the TCP connections it accepts before
any TLS handshake, so a test can assert that "blocked" means "no connection was made at all".
``settings_for`` gives every attempt ``attempt_timeout=DEADLINE`` (1.0 s), and the connection
(TCP and the TLS handshake) may take all of it: the receiver shares the test's event loop, so on
a loaded machine (parallel test workers) the handshake alone can take longer than half a second,
and no test here is about connecting slowly.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

import trustme
from aiohttp.abc import AbstractResolver

from clubwire.services.delivery.outbound import Answer, Sender
from clubwire.settings import Settings
from tests.conftest import make_settings

T = TypeVar("T")
Reader = asyncio.StreamReader
Writer = asyncio.StreamWriter
Handler = Callable[["Receiver", Reader, Writer], Awaitable[None]]

BODY = b'{"id":"evt_1","event":"ping"}'
HEADERS = {"Content-Type": "application/json", "X-Service-Event": "ping"}
DEADLINE = 1.0
# Reached by a connection to them here, where nothing stops it: a receiver on every local
# IPv4 interface answers 0.0.0.0 and all of 127/8.
LOCALLY_REACHABLE = ["0.0.0.0", "127.0.0.1", "127.255.255.254"]


# -- certificates ------------------------------------------------------------------------


@dataclass(frozen=True)
class Tls:
    ca: trustme.CA
    server: ssl.SSLContext  # localhost, hook.example, 127.0.0.1, ::1, ::ffff:127.0.0.1
    ca_bundle: Path


def server_context(cert: trustme.LeafCert) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(context)
    return context


def settings_for(tmp_path: Path, tls: Tls, *, allow_private: bool = True) -> Settings:
    return make_settings(
        "sqlite:///unused.db",
        tmp_path,
        allow_private_targets=allow_private,
        ca_bundle=tls.ca_bundle,
        attempt_timeout=DEADLINE,
        connect_timeout=DEADLINE,
    )


# -- receivers ---------------------------------------------------------------------------


@dataclass
class Request:
    head: str
    body: bytes

    def header(self, name: str) -> str | None:
        for line in self.head.split("\r\n")[1:]:
            key, _, value = line.partition(":")
            if key.strip().lower() == name.lower():
                return value.strip()
        return None


@dataclass
class Receiver:
    """A server on a free local port; ``connections`` counts accepted TCP connections."""

    handler: Handler
    tls: ssl.SSLContext | None
    host: str = "127.0.0.1"
    connections: int = 0
    requests: list[Request] = field(default_factory=list)
    port: int = 0
    _server: asyncio.Server | None = None
    _open: dict[asyncio.Task[object], Writer] = field(default_factory=dict)

    async def __aenter__(self) -> Self:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(self._protocol, self.host, 0, ssl=self.tls)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._open.values():
            writer.transport.abort()  # handlers see the connection lost and return
        if self._open:
            await asyncio.wait(self._open, timeout=1.0)
        await self._server.wait_closed()

    def url(self, host: str | None = None, path: str = "/hook") -> str:
        return f"https://{host or self.host}:{self.port}{path}"

    def _protocol(self) -> asyncio.Protocol:
        self.connections += 1
        return asyncio.StreamReaderProtocol(asyncio.StreamReader(), self._serve)

    async def _serve(self, reader: Reader, writer: Writer) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._open[task] = writer
        try:
            await self.handler(self, reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            del self._open[task]
            writer.close()
            with contextlib.suppress(ConnectionError, ssl.SSLError, asyncio.CancelledError):
                await writer.wait_closed()

    async def read_request(self, reader: Reader) -> Request | None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        except asyncio.IncompleteReadError:
            return None
        request = Request(head, b"")
        request.body = await reader.readexactly(int(request.header("Content-Length") or 0))
        self.requests.append(request)
        return request


def response(status: int, body: bytes = b"", *extra: str) -> bytes:
    lines = [f"HTTP/1.1 {status} Whatever", f"Content-Length: {len(body)}", *extra]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def answering(status: int, body: bytes = b"", *extra: str) -> Handler:
    """Answers every request on the connection (keep-alive) the same way."""

    async def handler(receiver: Receiver, reader: Reader, writer: Writer) -> None:
        while await receiver.read_request(reader) is not None:
            writer.write(response(status, body, *extra))
            await writer.drain()

    return handler


async def silent(receiver: Receiver, reader: Reader, writer: Writer) -> None:
    await receiver.read_request(reader)
    await reader.read()  # until the client gives up


def trickling(data: bytes, interval: float = 0.2) -> Handler:
    async def handler(receiver: Receiver, reader: Reader, writer: Writer) -> None:
        await receiver.read_request(reader)
        for index in range(len(data)):
            writer.write(data[index : index + 1])
            await writer.drain()
            await asyncio.sleep(interval)

    return handler


async def trickle_body(receiver: Receiver, reader: Reader, writer: Writer) -> None:
    await receiver.read_request(reader)
    writer.write(response(200, b"x" * 100)[:-100])
    while True:
        writer.write(b"x")
        await writer.drain()
        await asyncio.sleep(0.2)


async def endless(receiver: Receiver, reader: Reader, writer: Writer) -> None:
    await receiver.read_request(reader)
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n")  # until close
    while True:
        writer.write(b"a" * 16384)
        await writer.drain()


async def resetting(receiver: Receiver, reader: Reader, writer: Writer) -> None:
    await receiver.read_request(reader)
    writer.write(response(200, b"x" * 1000)[:-990])
    await writer.drain()
    await asyncio.sleep(0.05)
    raw = writer.get_extra_info("socket")
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()  # a TCP RST mid-body


async def closing_mid_body(receiver: Receiver, reader: Reader, writer: Writer) -> None:
    await receiver.read_request(reader)
    writer.write(response(200, b"x" * 1000)[:-990])
    await writer.drain()  # then a clean close, 990 bytes short


async def garbage(receiver: Receiver, reader: Reader, writer: Writer) -> None:
    await receiver.read_request(reader)
    writer.write(b"HELLO THERE\r\n\r\n")
    await writer.drain()


async def hang_up(receiver: Receiver, reader: Reader, writer: Writer) -> None:
    """A plain TCP trap (proxy, redirect target): it only counts connections."""


# -- helpers -----------------------------------------------------------------------------


def run(coroutine: Coroutine[object, object, T]) -> T:
    return asyncio.run(coroutine)


async def post(settings: Settings, url: str, resolver: AbstractResolver | None = None) -> Answer:
    async with Sender(settings, resolver) as sender:
        return await sender.post(url, BODY, HEADERS)


def ipv6_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < seconds
