"""Rate limits of the club data API (ADR 0009), as plain values: a policy counts requests in
fixed windows of a minute, aligned to the clock, so that every process counts the same
window; where a caller stands in it is told by the IETF ``RateLimit-Policy`` and
``RateLimit`` header fields (draft-ietf-httpapi-ratelimit-headers)."""

from __future__ import annotations

import math
from dataclasses import dataclass

WINDOW_SECONDS = 60


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

    def headers(self) -> dict[str, str]:
        """The answer's ``RateLimit-Policy`` and ``RateLimit`` fields, and ``Retry-After``
        when over the quota: the seconds until the window ends."""
        name, left = self.policy.name, self.window.left
        fields = {
            "RateLimit-Policy": self.policy.field,
            "RateLimit": f'"{name}";r={self.remaining};t={left}',
        }
        if self.over:
            fields["Retry-After"] = str(left)
        return fields
