"""The webhook client against real local receivers: real sockets, real TLS (trustme).

Every receiver is started inside the test on a free port and counts the TCP connections it
accepts (before any TLS handshake), so "blocked" means "no connection was made at all".
Attempts use ``attempt_timeout=1.0`` and ``connect_timeout=0.5``.
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
from ipaddress import ip_address
from pathlib import Path
from types import TracebackType
from typing import Self, TypeVar

import aiohttp
import pytest
import trustme
from aiohttp.abc import AbstractResolver, ResolveResult

from clubwire.domain import addresses
from clubwire.settings import Settings
from clubwire.worker.client import Blocked, Outcome, PublicResolver, Sender
from tests.conftest import make_settings
from tests.ranges import NON_GLOBAL_V4, NON_GLOBAL_V6

T = TypeVar("T")
Reader = asyncio.StreamReader
Writer = asyncio.StreamWriter
Handler = Callable[["Receiver", Reader, Writer], Awaitable[None]]

BODY = b'{"id":"evt_1","event":"ping"}'
HEADERS = {"Content-Type": "application/json", "X-Service-Event": "ping"}
DEADLINE = 1.0
# Globally routable but not served here: connecting to it fails (refused, unreachable or a
# connect timeout, depending on the network); it must never reach the local receiver.
PUBLIC = "1.2.3.4"
METADATA = "http://169.254.169.254/latest/meta-data/"


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


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    ca = trustme.CA()
    cert = ca.issue_cert("localhost", "hook.example", "127.0.0.1", "::1", "::ffff:127.0.0.1")
    path = tmp_path_factory.mktemp("ca") / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return Tls(ca, server_context(cert), path)


def settings_for(tmp_path: Path, tls: Tls, *, allow_private: bool = True) -> Settings:
    return make_settings(
        "sqlite:///unused.db",
        tmp_path,
        allow_private_targets=allow_private,
        ca_bundle=tls.ca_bundle,
        attempt_timeout=DEADLINE,
        connect_timeout=0.5,
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


class StubResolver(AbstractResolver):
    """Answers each lookup with the next list of addresses (the last one repeats)."""

    def __init__(self, *answers: list[str]) -> None:
        self.answers = answers
        self.lookups: list[str] = []
        self.families: list[socket.AddressFamily] = []

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups.append(host)
        self.families.append(family)
        found = self.answers[min(len(self.lookups), len(self.answers)) - 1]
        return [resolved(host, address, port) for address in found]

    async def close(self) -> None:
        return None


def resolved(host: str, address: str, port: int) -> ResolveResult:
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return {
        "hostname": host,
        "host": address,
        "port": port,
        "family": family,
        "proto": 0,
        "flags": socket.AI_NUMERICHOST,
    }


# -- helpers -----------------------------------------------------------------------------


def run(coroutine: Coroutine[object, object, T]) -> T:
    return asyncio.run(coroutine)


async def post(settings: Settings, url: str, resolver: AbstractResolver | None = None) -> Outcome:
    async with Sender(settings, resolver) as sender:
        return await sender.post(url, BODY, HEADERS)


def ipv6_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        return False
    return True


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


CONNECT_FAILURES = {
    "connection refused",
    "connect timeout",
    "timeout",
    "network unreachable",
    "host unreachable",
    "connect failed",
}


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    started = time.monotonic()
    yield
    assert time.monotonic() - started < seconds


# -- success -----------------------------------------------------------------------------


def test_a_2xx_answer_is_a_success_with_an_excerpt(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200, b'{"received":true}'), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url()), receiver

    outcome, receiver = run(scenario())

    assert outcome.ok
    assert (outcome.status, outcome.error) == (200, None)
    assert outcome.excerpt == '{"received":true}'
    assert outcome.describe() == f"200 in {outcome.duration_ms} ms"
    [request] = receiver.requests
    assert request.head.startswith("POST /hook HTTP/1.1")
    assert request.body == BODY
    assert request.header("Accept-Encoding") == "identity"
    assert request.header("X-Service-Event") == "ping"


def test_connections_are_kept_alive_between_attempts(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> tuple[list[Outcome], Receiver]:
        async with (
            Receiver(answering(204), tls.server) as receiver,
            Sender(settings_for(tmp_path, tls)) as sender,
        ):
            outcomes = [await sender.post(receiver.url(), BODY, HEADERS) for _ in range(3)]
        return outcomes, receiver

    outcomes, receiver = run(scenario())

    assert all(outcome.ok for outcome in outcomes)
    assert (receiver.connections, len(receiver.requests)) == (1, 3)


def test_a_non_2xx_answer_is_a_failure_without_an_error(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(answering(500, b"oops <b>"), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())

    assert not outcome.ok
    assert (outcome.status, outcome.error, outcome.excerpt) == (500, None, "oops <b>")
    assert outcome.describe() == f"failed: status 500 after {outcome.duration_ms} ms"


# -- addresses ---------------------------------------------------------------------------

V4_SPELLINGS = ["127.0.0.1", "2130706433", "0x7f.1", "017700000001", "0177.0.0.1", "127.1"]


@pytest.mark.parametrize("host", V4_SPELLINGS)
def test_loopback_literals_are_blocked_without_a_connection(
    tmp_path: Path, tls: Tls, host: str
) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200), tls.server) as receiver:
            settings = settings_for(tmp_path, tls, allow_private=False)
            return await post(settings, receiver.url(host)), receiver

    outcome, receiver = run(scenario())

    assert (outcome.status, outcome.error) == (None, "blocked: 127.0.0.1 is not a public address")
    assert receiver.connections == 0


@pytest.mark.parametrize(
    ("host", "listen", "shown"),
    [("[::1]", "::1", "::1"), ("[::ffff:127.0.0.1]", "127.0.0.1", "::ffff:127.0.0.1")],
)
def test_ipv6_loopback_literals_are_blocked_and_reachable_only_when_allowed(
    tmp_path: Path, tls: Tls, host: str, listen: str, shown: str
) -> None:
    if not ipv6_available():
        pytest.skip("no IPv6 loopback here")

    async def scenario() -> tuple[Outcome, Outcome, Receiver]:
        async with Receiver(answering(200), tls.server, host=listen) as receiver:
            url = receiver.url(host)
            blocked = await post(settings_for(tmp_path, tls, allow_private=False), url)
            connections = receiver.connections
            allowed = await post(settings_for(tmp_path, tls, allow_private=True), url)
            receiver.connections -= connections
            return blocked, allowed, receiver

    blocked, allowed, receiver = run(scenario())

    assert blocked.error == f"blocked: {shown} is not a public address"
    assert allowed.ok  # the receiver was there to be reached
    assert receiver.connections == 1  # and only the allowed attempt reached it


def test_a_name_resolving_to_loopback_is_blocked_by_the_resolver(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200), tls.server) as receiver:
            settings = settings_for(tmp_path, tls, allow_private=False)
            return await post(settings, receiver.url("localhost")), receiver

    outcome, receiver = run(scenario())

    assert outcome.error == "blocked: localhost resolves only to non-public addresses"
    assert receiver.connections == 0


NON_GLOBAL = NON_GLOBAL_V4 + NON_GLOBAL_V6
# Reached by a connection to them here, where nothing stops it: a receiver on every local
# IPv4 interface answers 0.0.0.0 and all of 127/8.
LOCALLY_REACHABLE = ["0.0.0.0", "127.0.0.1", "127.255.255.254"]


def literal_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


@pytest.mark.parametrize("address", NON_GLOBAL)
def test_a_literal_address_in_any_non_global_range_is_never_connected(
    tmp_path: Path, tls: Tls, address: str
) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200), tls.server, host="0.0.0.0") as receiver:
            settings = settings_for(tmp_path, tls, allow_private=False)
            return await post(settings, receiver.url(literal_host(address))), receiver

    outcome, receiver = run(scenario())

    shown = addresses.display(ip_address(address))
    assert (outcome.status, outcome.error) == (None, f"blocked: {shown} is not a public address")
    assert receiver.connections == 0


@pytest.mark.parametrize("address", NON_GLOBAL)
def test_a_name_resolving_into_any_non_global_range_is_never_connected(
    tmp_path: Path, tls: Tls, address: str
) -> None:
    stub = StubResolver([address])

    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200), tls.server, host="0.0.0.0") as receiver:
            settings = settings_for(tmp_path, tls, allow_private=False)
            return await post(settings, receiver.url("hook.example"), stub), receiver

    outcome, receiver = run(scenario())

    assert outcome.error == "blocked: hook.example resolves only to non-public addresses"
    assert receiver.connections == 0
    assert stub.lookups == ["hook.example"]


@pytest.mark.parametrize("address", LOCALLY_REACHABLE)
def test_the_receiver_of_the_range_tests_is_reached_when_nothing_blocks(
    tmp_path: Path, tls: Tls, address: str
) -> None:
    """The control for the two tests above: unblocked, these addresses reach the receiver."""
    stub = StubResolver([address])

    async def scenario() -> Receiver:
        async with Receiver(answering(200), tls.server, host="0.0.0.0") as receiver:
            await post(settings_for(tmp_path, tls), receiver.url("hook.example"), stub)
            return receiver

    assert run(scenario()).connections == 1


@pytest.mark.parametrize("name", ["2130706433", "0x7f.1", "localhost"])
def test_the_resolver_filter_refuses_numeric_names_too(name: str) -> None:
    """Behind ``check_url``: the system resolver reads ``2130706433`` as 127.0.0.1."""

    async def scenario() -> None:
        resolver = PublicResolver(aiohttp.ThreadedResolver())
        with pytest.raises(Blocked, match=f"blocked: {name} resolves only to non-public"):
            await resolver.resolve(name, 443, socket.AF_UNSPEC)
        await resolver.close()

    run(scenario())


def test_the_resolver_keeps_only_the_public_addresses_of_a_mixed_answer() -> None:
    async def scenario() -> list[ResolveResult]:
        stub = StubResolver(["127.0.0.1", PUBLIC, "10.0.0.5", "::1", "169.254.169.254"])
        return await PublicResolver(stub).resolve("hook.example", 443)

    assert [result["host"] for result in run(scenario())] == [PUBLIC]


def test_an_empty_answer_is_a_lookup_failure_not_a_block() -> None:
    async def scenario() -> None:
        with pytest.raises(OSError, match=r"^hook\.example has no addresses$") as caught:
            await PublicResolver(StubResolver([])).resolve("hook.example", 443)
        assert not isinstance(caught.value, Blocked)

    run(scenario())


def test_a_mixed_answer_connects_only_to_the_checked_public_address(
    tmp_path: Path, tls: Tls
) -> None:
    stub = StubResolver(["127.0.0.1", PUBLIC])

    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200), tls.server) as receiver:
            settings = settings_for(tmp_path, tls, allow_private=False)
            return await post(settings, receiver.url("hook.example"), stub), receiver

    outcome, receiver = run(scenario())

    assert outcome.error in CONNECT_FAILURES | {"tls: certificate verify failed"}
    assert receiver.connections == 0  # 127.0.0.1 was dropped, so only PUBLIC was tried
    assert stub.lookups == ["hook.example"]  # resolved once


def test_dns_rebinding_never_reaches_the_private_address(tmp_path: Path, tls: Tls) -> None:
    """First lookup public, every later one 127.0.0.1: no attempt ever reaches 127.0.0.1."""
    stub = StubResolver([PUBLIC], ["127.0.0.1"])

    async def scenario() -> tuple[list[Outcome], Receiver]:
        async with (
            Receiver(answering(200), tls.server) as receiver,
            Sender(settings_for(tmp_path, tls, allow_private=False), stub) as sender,
        ):
            url = receiver.url("hook.example")
            outcomes = [await sender.post(url, BODY, HEADERS) for _ in range(3)]
        return outcomes, receiver

    outcomes, receiver = run(scenario())

    assert not any(outcome.ok for outcome in outcomes)
    assert receiver.connections == 0
    assert len(stub.lookups) <= 3  # at most one lookup per attempt


def test_with_private_targets_allowed_the_resolved_address_is_reached(
    tmp_path: Path, tls: Tls
) -> None:
    """``hook.example`` exists only in the stub: the connection goes where it said."""
    stub = StubResolver(["127.0.0.1"])

    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200, b"hi"), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url("hook.example"), stub), (
                receiver
            )

    outcome, receiver = run(scenario())

    assert outcome.ok
    assert receiver.connections == 1
    assert stub.lookups == ["hook.example"]


# -- redirects, proxies ------------------------------------------------------------------


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed(tmp_path: Path, tls: Tls, status: int) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        handler = answering(status, b"moved", f"Location: {METADATA}")
        async with Receiver(handler, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url()), receiver

    outcome, receiver = run(scenario())

    assert not outcome.ok
    assert outcome.status == status
    assert outcome.error == f"redirect not followed ({status} to {METADATA})"
    assert outcome.excerpt == "moved"
    assert len(receiver.requests) == 1


def test_a_redirect_to_a_reachable_local_target_is_not_followed(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200), tls.server) as target:
            handler = answering(302, b"", f"Location: {target.url()}")
            async with Receiver(handler, tls.server) as receiver:
                return await post(settings_for(tmp_path, tls), receiver.url()), target

    outcome, target = run(scenario())

    assert outcome.status == 302
    assert outcome.error is not None
    assert outcome.error.startswith("redirect not followed (302 to https://127.0.0.1:")
    assert target.connections == 0


def test_proxy_environment_variables_are_ignored(
    tmp_path: Path, tls: Tls, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)

    async def scenario() -> tuple[Outcome, Receiver, Receiver]:
        async with (
            Receiver(hang_up, None) as proxy,
            Receiver(answering(200), tls.server) as receiver,
        ):
            for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY"):
                monkeypatch.setenv(name, f"http://127.0.0.1:{proxy.port}")
                monkeypatch.setenv(name.lower(), f"http://127.0.0.1:{proxy.port}")
            return await post(settings_for(tmp_path, tls), receiver.url()), receiver, proxy

    outcome, receiver, proxy = run(scenario())

    assert outcome.ok
    assert receiver.connections == 1
    assert proxy.connections == 0


# -- deadlines and bodies ----------------------------------------------------------------


def test_a_silent_receiver_times_out_at_the_deadline(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(silent, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    with within(DEADLINE + 0.5):
        outcome = run(scenario())

    assert (outcome.status, outcome.error) == (None, "timeout")
    assert DEADLINE * 1000 - 50 <= outcome.duration_ms <= DEADLINE * 1000 + 300
    assert outcome.describe() == f"failed: timeout after {outcome.duration_ms} ms"


def test_a_trickling_status_line_times_out(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(trickling(response(200, b"fine")), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    with within(DEADLINE + 0.5):
        outcome = run(scenario())

    assert (outcome.status, outcome.error) == (None, "timeout")


def test_a_trickling_body_times_out_even_after_a_200(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(trickle_body, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    with within(DEADLINE + 0.5):
        outcome = run(scenario())

    assert (outcome.status, outcome.error) == (200, "timeout")
    assert not outcome.ok
    assert 1 <= len(outcome.excerpt) < 100
    assert set(outcome.excerpt) == {"x"}


async def trickle_body(receiver: Receiver, reader: Reader, writer: Writer) -> None:
    await receiver.read_request(reader)
    writer.write(response(200, b"x" * 100)[:-100])
    while True:
        writer.write(b"x")
        await writer.drain()
        await asyncio.sleep(0.2)


def test_nul_in_an_answer_is_kept_as_a_replacement_character(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(answering(200, b"ok\x00\xffdone"), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    assert run(scenario()).excerpt == "ok\ufffd\ufffddone"


def test_an_endless_body_is_read_up_to_64_kib_then_dropped(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(endless, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())

    assert outcome.ok  # reading stopped at 64 KiB, well before the deadline
    assert outcome.duration_ms < DEADLINE * 1000
    assert outcome.excerpt == "a" * 1000


def test_a_long_body_is_cut_and_its_connection_not_reused(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> tuple[list[Outcome], Receiver]:
        body = "é".encode() * 100_000
        async with (
            Receiver(answering(200, body), tls.server) as receiver,
            Sender(settings_for(tmp_path, tls)) as sender,
        ):
            outcomes = [await sender.post(receiver.url(), BODY, HEADERS) for _ in range(2)]
        return outcomes, receiver

    outcomes, receiver = run(scenario())

    assert all(outcome.ok and outcome.excerpt == "é" * 1000 for outcome in outcomes)
    assert receiver.connections == 2


# -- broken connections and TLS ----------------------------------------------------------


def test_a_reset_mid_response_is_a_connection_reset(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(resetting, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())

    assert (outcome.status, outcome.error, outcome.excerpt) == (200, "connection reset", "x" * 10)
    assert not outcome.ok


def test_a_close_mid_body_is_an_incomplete_body(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(closing_mid_body, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())

    assert (outcome.status, outcome.error) == (200, "response body incomplete")


def test_a_closed_port_is_connection_refused(tmp_path: Path, tls: Tls) -> None:
    outcome = run(post(settings_for(tmp_path, tls), f"https://127.0.0.1:{closed_port()}/"))

    assert (outcome.status, outcome.error) == (None, "connection refused")
    assert outcome.describe() == f"failed: connection refused after {outcome.duration_ms} ms"


def test_an_answer_that_is_not_http_is_an_invalid_response(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Outcome:
        async with Receiver(garbage, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    assert run(scenario()).error == "invalid http response"


def test_a_certificate_from_an_unknown_ca_is_refused(tmp_path: Path, tls: Tls) -> None:
    stranger = server_context(trustme.CA().issue_cert("localhost", "127.0.0.1"))

    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200), stranger) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url()), receiver

    outcome, receiver = run(scenario())

    assert (outcome.status, outcome.error) == (None, "tls: certificate verify failed")
    assert receiver.requests == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_certificate_for_another_name_is_refused(tmp_path: Path, tls: Tls, host: str) -> None:
    other = server_context(tls.ca.issue_cert("other.example"))

    async def scenario() -> tuple[Outcome, Receiver]:
        async with Receiver(answering(200), other) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url(host)), receiver

    outcome, receiver = run(scenario())

    assert (outcome.status, outcome.error) == (None, "tls: host name mismatch")
    assert receiver.requests == []


# -- the URL itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://hook.example/", "invalid url: URL must use https://"),
        ("https://u:p@hook.example/", "invalid url: URL must not contain a user name or password"),
        ("https://hook.example:0/", "invalid url: URL port must be a number from 1 to 65535"),
    ],
)
def test_an_unsafe_url_is_an_outcome_not_an_exception(
    tmp_path: Path, tls: Tls, url: str, error: str
) -> None:
    outcome = run(post(settings_for(tmp_path, tls), url))

    assert (outcome.status, outcome.error) == (None, error)


def test_posting_outside_the_context_is_a_programming_error(tmp_path: Path, tls: Tls) -> None:
    sender = Sender(settings_for(tmp_path, tls))

    with pytest.raises(RuntimeError, match="async with"):
        run(sender.post("https://hook.example/", BODY, HEADERS))
