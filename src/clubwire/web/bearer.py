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
    presented = key_format.bearer_token(authorization)
    if presented is None:
        raise errors.MissingCredentials(f"Send the {name}: Authorization: Bearer <{setting}>.")
    if not hmac.compare_digest(presented.encode("latin-1"), expected.get_secret_value().encode()):
        raise errors.Unauthenticated(f"The {name} is not right.")
