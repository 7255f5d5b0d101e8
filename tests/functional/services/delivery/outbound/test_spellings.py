"""Hosts the HTTP client reads differently from how they are written (UTS #46): Unicode
digits, full-width and ideographic dots, mixed scripts. Each is judged as the client reads
it, at send time, with a local receiver counting the connections it accepts."""

from __future__ import annotations

from ipaddress import ip_address
from pathlib import Path

import pytest

from clubwire.domain import addresses
from clubwire.services.delivery.outbound import Answer
from tests.functional.services.delivery.outbound.harness import (
    LOCALLY_REACHABLE,
    Receiver,
    Tls,
    answering,
    post,
    run,
)
from tests.functional.services.delivery.outbound.harness import settings_for as settings_in
from tests.ranges import NON_GLOBAL_V4, NON_GLOBAL_V6
from tests.resolvers import StubResolver
from tests.spellings import spelled

WIDE_NAME = "ｈｏｏｋ\u3002ｅｘａｍｐｌｅ"  # hook.example, full-width with an ideographic dot
CIRCLED_LOCALHOST = "\u24db\u24de\u24d2\u24d0\u24db\u24d7\u24de\u24e2\u24e3"


def _post_to(tmp_path: Path, tls: Tls, host: str, *, allow_private: bool) -> tuple[Answer, int]:
    """One attempt at ``host`` on a receiver listening on every local IPv4 address; the
    outcome and the connections that receiver accepted."""

    async def scenario() -> tuple[Answer, int]:
        async with Receiver(answering(200), tls.server, host="0.0.0.0") as receiver:
            settings = settings_in(tmp_path, tls, allow_private=allow_private)
            outcome = await post(settings, receiver.url(host))
            return outcome, receiver.connections

    return run(scenario())


@pytest.mark.parametrize(("address", "host"), spelled(NON_GLOBAL_V4 + NON_GLOBAL_V6))
def test_a_spelled_non_public_literal_is_blocked_without_a_connection(
    tmp_path: Path, tls: Tls, address: str, host: str
) -> None:
    outcome, connections = _post_to(tmp_path, tls, host, allow_private=False)

    shown = addresses.display(ip_address(address))
    assert (outcome.status, outcome.error) == (None, f"blocked: {shown} is not a public address")
    assert connections == 0


@pytest.mark.parametrize(("address", "host"), spelled(LOCALLY_REACHABLE))
def test_a_spelled_literal_is_refused_even_where_private_targets_are_allowed(
    tmp_path: Path, tls: Tls, address: str, host: str
) -> None:
    """The plain spelling of these addresses reaches the receiver (the control in
    test_targets.py); spelled otherwise, the attempt never connects."""
    outcome, connections = _post_to(tmp_path, tls, host, allow_private=True)

    assert outcome.error == f"invalid url: URL host {host} must be written as {address}"
    assert connections == 0


def test_a_name_spelled_wide_is_looked_up_as_the_client_reads_it(tmp_path: Path, tls: Tls) -> None:
    stub = StubResolver(["127.0.0.1"])

    async def scenario() -> tuple[Answer, Answer, Receiver]:
        async with Receiver(answering(200), tls.server) as receiver:
            url = receiver.url(WIDE_NAME)
            blocked = await post(settings_in(tmp_path, tls, allow_private=False), url, stub)
            allowed = await post(settings_in(tmp_path, tls, allow_private=True), url, stub)
            return blocked, allowed, receiver

    blocked, allowed, receiver = run(scenario())

    assert blocked.error == "blocked: hook.example resolves only to non-public addresses"
    assert allowed.ok  # the same reading, with TLS verified for hook.example
    assert stub.lookups == ["hook.example", "hook.example"]
    assert receiver.connections == 1  # the allowed attempt only


def test_a_circled_localhost_is_blocked_by_the_system_resolver(tmp_path: Path, tls: Tls) -> None:
    outcome, connections = _post_to(tmp_path, tls, CIRCLED_LOCALHOST, allow_private=False)

    assert outcome.error == "blocked: localhost resolves only to non-public addresses"
    assert connections == 0
