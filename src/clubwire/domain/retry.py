"""The retry schedule (SPEC §8) as a small value object.

Each retry comes due a little after its step, by a share of the step the caller draws at
random (DESIGN §6: never earlier than the step, at most 10 % of it later), so that the
deliveries of an endpoint that failed together do not all come due in the same second.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

SPREAD = 0.1  # a retry comes due at most this share of its step after the step


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """Attempt 1 is immediate; after failed attempt n the next is due ``delays[n - 1]`` later.

    With the default five delays, a failed sixth attempt makes the delivery dead.
    """

    delays: tuple[int, ...] = (60, 300, 1800, 7200, 43200)
    spread: float = SPREAD

    def delay_after(self, attempts_made: int, draw: float) -> timedelta | None:
        """How long to wait after ``attempts_made`` failed attempts; ``None`` means give up.

        ``draw`` (0 ≤ draw < 1, the caller's randomness) places the wait within its spread:
        the step, plus ``draw × spread`` of it.
        """
        if attempts_made < 1 or attempts_made > len(self.delays):
            return None
        step = self.delays[attempts_made - 1]
        return timedelta(seconds=step * (1 + self.spread * draw))
