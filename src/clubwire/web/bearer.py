"""Operators' tokens, presented as ``Authorization: Bearer <token>`` and compared in constant
time: the platform token (the internal API) and the metrics token."""

from __future__ import annotations

import hmac

from pydantic import SecretStr

from clubwire import errors
from clubwire.domain import key_format


def require(authorization: str | None, expected: SecretStr, name: str, setting: str) -> None:
    """Return when ``authorization`` holds the token ``expected``; else raise 401 saying which
    token to send (``name``, e.g. "metrics token", kept in ``setting``), never its value."""
    if key_format.bearer_token(authorization) is None:
        raise errors.MissingCredentials(f"Send the {name}: Authorization: Bearer <{setting}>.")
    if not holds(authorization, expected):
        raise errors.Unauthenticated(f"The {name} is not right.")


def holds(authorization: str | None, expected: SecretStr | None) -> bool:
    """Whether ``authorization`` holds the token ``expected`` (None: no token is right)."""
    presented = key_format.bearer_token(authorization)
    if presented is None or expected is None:
        return False
    return hmac.compare_digest(presented.encode("latin-1"), expected.get_secret_value().encode())
