"""Rate limits of the club data API (ADR 0009), as plain values: a policy counts requests in
fixed windows of a minute, aligned to the clock, so that every process counts the same
window; where a caller stands in it is told by the IETF ``RateLimit-Policy`` and
``RateLimit`` header fields (draft-ietf-httpapi-ratelimit-headers), one list member per
policy the request was counted under."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

WINDOW_SECONDS = 60
# The club data API's policies (ADR 0009), as the header fields name them.
PER_KEY = "per-key"
PER_CLUB = "per-club"
AUTH_FAILURES = "auth-failures"


@dataclass(frozen=True, slots=True)
class Policy:
    """``quota`` requests a window, counted per partition (a key, a client address); a quota
    of 0 turns the policy off."""

    name: str
    quota: int

    @property
    def on(self) -> bool:
        return self.quota > 0

    @property
    def field(self) -> str:
        """Its ``RateLimit-Policy`` member: ``"per-key";q=600;w=60``."""
        return f'"{self.name}";q={self.quota};w={WINDOW_SECONDS}'


@dataclass(frozen=True, slots=True)
class Window:
    """The window a moment falls in: its number since the epoch, and the whole seconds left
    in it (at least 1)."""

    number: int
    left: int

    @classmethod
    def at(cls, seconds: float) -> Window:
        """The window of ``seconds`` since the epoch."""
        number = math.floor(seconds / WINDOW_SECONDS)
        left = math.ceil((number + 1) * WINDOW_SECONDS - seconds)
        return cls(number, max(1, left))


@dataclass(frozen=True, slots=True)
class Standing:
    """Where a partition stands under ``policy`` in ``window`` after ``used`` requests (this
    one included when it was let through)."""

    policy: Policy
    used: int
    window: Window

    @property
    def over(self) -> bool:
        return self.used > self.policy.quota

    @property
    def remaining(self) -> int:
        return max(0, self.policy.quota - self.used)

    @property
    def field(self) -> str:
        """Its ``RateLimit`` member: ``"per-key";r=599;t=42``."""
        return f'"{self.policy.name}";r={self.remaining};t={self.window.left}'

    def uncounted(self) -> Standing:
        """Where the partition stands when this request, refused under another policy, was
        not counted here after all."""
        return replace(self, used=self.used - 1)

    def headers(self) -> dict[str, str]:
        """The answer's fields under this policy alone: see :func:`headers`."""
        return headers([self])


def refusing(standings: Sequence[Standing]) -> Standing | None:
    """The first of ``standings`` over its quota: the policy that refuses the request."""
    return next((standing for standing in standings if standing.over), None)


def headers(standings: Sequence[Standing]) -> dict[str, str]:
    """The answer's ``RateLimit-Policy`` and ``RateLimit`` fields, one list member per policy
    in the order given, and ``Retry-After`` when one is over its quota: the seconds until
    its window ends. Nothing when no policy is on."""
    if not standings:
        return {}
    fields = {
        "RateLimit-Policy": ", ".join(standing.policy.field for standing in standings),
        "RateLimit": ", ".join(standing.field for standing in standings),
    }
    over = refusing(standings)
    if over is not None:
        fields["Retry-After"] = str(over.window.left)
    return fields
