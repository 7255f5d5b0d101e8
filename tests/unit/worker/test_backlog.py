"""How deep a worker's per-endpoint backlog may be: each waiting job's attempt ends in its lease."""

from __future__ import annotations

import pytest

from clubwire.settings import Settings
from clubwire.worker.lanes import BACKLOG_ROUNDS, backlog_rounds


@pytest.mark.parametrize(
    ("lease", "timeout", "rounds"),
    [
        (60, 10, BACKLOG_ROUNDS),  # the defaults: wait four rounds, then 10 s of its own
        (25, 10, 1),
        (20, 10, 1),
        (19.9, 10, 0),  # no room to wait: claimed jobs beyond the limit are given back
        (11, 10, 0),
    ],
)
def test_waiting_and_the_attempt_itself_fit_in_the_lease(
    lease: float, timeout: float, rounds: int
) -> None:
    settings = Settings(lease_seconds=lease, attempt_timeout=timeout)
    assert backlog_rounds(settings) == rounds
    assert (rounds + 1) * timeout <= lease
