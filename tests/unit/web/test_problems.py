"""Which status each clubwire error is answered with (web/problems.py, the one place)."""

from __future__ import annotations

import pytest

from clubwire import errors
from clubwire.web import problems


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (errors.InvalidInput(), 422),
        (errors.NotFound(), 404),
        (errors.MissingCredentials(), 401),
        (errors.InsufficientScope("read:programs"), 403),
        (errors.IdempotencyKeyReused(), 409),
        (errors.TooManyAttempts(), 429),
        (errors.DatabaseUnavailable(), 503),
        (errors.ConfigurationError(), 503),
        (errors.ClubwireError(), 500),
    ],
)
def test_each_error_has_its_status(error: errors.ClubwireError, status: int) -> None:
    assert problems.status_of(error) == status


def test_only_an_unavailable_database_says_when_to_try_again() -> None:
    assert problems.headers_of(errors.DatabaseUnavailable()) == {
        "Retry-After": str(problems.RETRY_AFTER)
    }
    assert problems.headers_of(errors.ConfigurationError()) is None
