"""The retry schedule (SPEC §8) as a small value object."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta


@dataclass(frozen=True, slots=True)
class RetrySchedule:
    """Attempt 1 is immediate; after failed attempt n the next is due ``delays[n - 1]`` later.

    With the default five delays, a failed sixth attempt makes the delivery dead.
    """

    delays: tuple[int, ...] = (60, 300, 1800, 7200, 43200)

    @property
    def max_attempts(self) -> int:
        return len(self.delays) + 1

    def delay_after(self, attempts_made: int) -> timedelta | None:
        """How long to wait after ``attempts_made`` failed attempts; ``None`` means give up."""
        if attempts_made < 1 or attempts_made > len(self.delays):
            return None
        return timedelta(seconds=self.delays[attempts_made - 1])
