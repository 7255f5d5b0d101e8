"""The errors clubwire raises. Each subclass's docstring is its default message.

The web layer maps them to problem+json responses, the CLI to one line on stderr;
nothing below the edges knows about HTTP status codes.
"""

from __future__ import annotations


class ClubwireError(Exception):
    """Something went wrong."""

    code = "error"
    # Which event of a batch it is about (0 first): set as it leaves the batch's item.
    item: int | None = None

    def __init__(self, detail: str | None = None) -> None:
        self.detail = detail or " ".join((self.__doc__ or "").split())
        super().__init__(self.detail)


class InvalidInput(ClubwireError):
    """The input is not valid."""

    code = "invalid_input"


class BadHeaders(InvalidInput):
    """These headers cannot be sent with an endpoint's deliveries."""

    def __init__(self, detail: str | None = None, part: str = "headers") -> None:
        super().__init__(detail)
        self.part = part  # what is refused: a header's "name", its "value", or the "headers"


class NotFound(ClubwireError):
    """Not found."""

    code = "not_found"


class Conflict(ClubwireError):
    """This cannot be done while the thing it acts on is as it is now."""

    code = "conflict"


class Unauthenticated(ClubwireError):
    """The API key is missing, malformed, fails its checksum, unknown, revoked or expired, or
    the club's module is off."""

    code = "invalid_token"


class MissingCredentials(Unauthenticated):
    """Send an API key in the header Authorization: Bearer cw_live_<prefix>_<secret>."""


class InsufficientScope(ClubwireError):
    """The API key lacks the scope this request needs."""

    code = "insufficient_scope"

    def __init__(self, scope: str) -> None:
        self.scope = scope
        super().__init__(f"This request needs an API key with the scope {scope}.")


class IdempotencyKeyReused(ClubwireError):
    """This idempotency key was first used for another event: a repeat must send the same
    event kind and data."""

    code = "idempotency_key_reused"


class Forbidden(ClubwireError):
    """You may not do this."""

    code = "forbidden"


class ConfigurationError(ClubwireError):
    """The configuration is not valid."""

    code = "configuration_error"


class NotMigrated(ClubwireError):
    """The database schema is not at the latest version: run `clubwire migrate`."""

    code = "not_migrated"


class DatabaseUnavailable(ClubwireError):
    """The database is unavailable for the moment: try again in a few seconds."""

    code = "database_unavailable"


class AlreadyRunning(ClubwireError):
    """Another clubwire worker is already running on this SQLite database; on SQLite exactly
    one runs (use PostgreSQL to run several)."""

    code = "already_running"


class TooManyRequests(ClubwireError):
    """Too many requests for this minute: try again when the answer's Retry-After says."""

    code = "rate_limited"


class TooManyAttempts(ClubwireError):
    """Too many failed sign-ins: wait a few minutes and try again."""

    code = "too_many_attempts"
