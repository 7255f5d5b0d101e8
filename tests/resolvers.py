"""A stub resolver for the webhook client's address checks: each lookup answers with the
addresses a test chose, and the resolver remembers what it was asked. Shared by the unit
tests of an attempt's outcome and the functional tests of the outbound client."""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult


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
