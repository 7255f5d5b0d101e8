"""Which addresses the webhook client may reach: literals, resolved names, redirects, proxies.

Every receiver is started inside the test on a free port and counts the TCP connections it
accepts (before any TLS handshake), so "blocked" means "no connection was made at all".
"""

from __future__ import annotations

import socket
from ipaddress import ip_address
from pathlib import Path

import aiohttp
import pytest
from aiohttp.abc import ResolveResult

from clubwire.domain import addresses
from clubwire.services.delivery.outbound import Answer, Blocked, PublicResolver, Sender
from tests.functional.services.delivery.outbound.harness import (
    BODY,
    HEADERS,
    LOCALLY_REACHABLE,
    Receiver,
    Tls,
    answering,
    hang_up,
    ipv6_available,
    post,
    run,
    settings_for,
)
from tests.ranges import NON_GLOBAL_V4, NON_GLOBAL_V6
from tests.resolvers import StubResolver

# Globally routable but not served here: connecting to it fails (refused, unreachable or a
# connect timeout, depending on the network); it must never reach the local receiver.
PUBLIC = "1.2.3.4"
METADATA = "http://169.254.169.254/latest/meta-data/"
CONNECT_FAILURES = {
    "connection refused",
    "connect timeout",
    "timeout",
    "network unreachable",
    "host unreachable",
    "connect failed",
}


# -- addresses ---------------------------------------------------------------------------

V4_SPELLINGS = ["127.0.0.1", "2130706433", "0x7f.1", "017700000001", "0177.0.0.1", "127.1"]


@pytest.mark.parametrize("host", V4_SPELLINGS)
def test_loopback_literals_are_blocked_without_a_connection(
    tmp_path: Path, tls: Tls, host: str
) -> None:
    async def scenario() -> tuple[Answer, Receiver]:
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

    async def scenario() -> tuple[Answer, Answer, Receiver]:
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
    async def scenario() -> tuple[Answer, Receiver]:
        async with Receiver(answering(200), tls.server) as receiver:
            settings = settings_for(tmp_path, tls, allow_private=False)
            return await post(settings, receiver.url("localhost")), receiver

    outcome, receiver = run(scenario())

    assert outcome.error == "blocked: localhost resolves only to non-public addresses"
    assert receiver.connections == 0


NON_GLOBAL = NON_GLOBAL_V4 + NON_GLOBAL_V6


def literal_host(address: str) -> str:
    return f"[{address}]" if ":" in address else address


@pytest.mark.parametrize("address", NON_GLOBAL)
def test_a_literal_address_in_any_non_global_range_is_never_connected(
    tmp_path: Path, tls: Tls, address: str
) -> None:
    async def scenario() -> tuple[Answer, Receiver]:
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

    async def scenario() -> tuple[Answer, Receiver]:
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

    async def scenario() -> tuple[Answer, Receiver]:
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

    async def scenario() -> tuple[list[Answer], Receiver]:
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

    async def scenario() -> tuple[Answer, Receiver]:
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
    async def scenario() -> tuple[Answer, Receiver]:
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
    async def scenario() -> tuple[Answer, Receiver]:
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

    async def scenario() -> tuple[Answer, Receiver, Receiver]:
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
