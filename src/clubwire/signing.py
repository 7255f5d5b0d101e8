"""Webhook signatures: ``X-Service-Signature: t=<unix seconds>,v1=<hex>`` (SPEC §5.3).

Standard library only: a receiver may import or copy this one file. ``v1`` is the hex
HMAC-SHA256 of ``b"<t>." + raw_body`` keyed with the UTF-8 of the whole ``whsec_…`` secret
(Stripe's scheme). A receiver passes the exact bytes received, never re-serialised JSON::

    raw = await request.body()
    try:
        signing.verify(raw, request.headers.get(signing.HEADER), secret)  # -> timestamp
    except signing.SignatureError as exc:  # bad, stale (> 300 s) or missing signature
        return Response(str(exc), status_code=400)
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
import time

__all__ = [
    "DEFAULT_TOLERANCE",
    "HEADER",
    "MalformedHeaderError",
    "SignatureError",
    "SignatureMismatchError",
    "TimestampToleranceError",
    "sign",
    "signature",
    "verify",
]

HEADER = "X-Service-Signature"
DEFAULT_TOLERANCE = 300
SCHEME = "v1"

# At most 20 ASCII digits: no sign, no "_", no non-ASCII digits, no float overflow.
_TIMESTAMP = re.compile(r"[0-9]{1,20}")
_OPTIONAL_WHITESPACE = " \t"


class SignatureError(ValueError):
    """The signature header does not prove the delivery is authentic and recent."""


class MalformedHeaderError(SignatureError):
    """The header is missing, empty, or lacks a valid ``t=`` or any ``v1=``."""


class TimestampToleranceError(SignatureError):
    """The signed timestamp is too far from the receiver's clock (replay or clock skew)."""


class SignatureMismatchError(SignatureError):
    """No ``v1=`` value matches the body and secret."""


def signature(secret: str, timestamp: int, body: bytes) -> str:
    """Return the bare hex HMAC-SHA256 of ``b"<timestamp>." + body`` keyed with ``secret``."""
    _require_bytes(body)
    _require_secret(secret)
    mac = _keyed(secret).copy()
    mac.update(f"{timestamp}.".encode())
    mac.update(body)
    return mac.hexdigest()


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Return the full header value ``t=<timestamp>,v1=<hex>``."""
    if timestamp < 0:
        raise ValueError(f"timestamp must be non-negative, got {timestamp}")
    return f"t={timestamp},{SCHEME}={signature(secret, timestamp, body)}"


def verify(
    body: bytes,
    header: str | None,
    secret: str,
    tolerance: int = DEFAULT_TOLERANCE,
    now: float | None = None,
) -> int:
    """Check ``header`` against the raw ``body``; return the signed timestamp.

    Raises a ``SignatureError`` subclass for any header that does not verify: missing or
    malformed, no matching ``v1`` (several are allowed; unknown schemes such as ``v0`` are
    ignored), or a timestamp more than ``tolerance`` seconds before or after ``now``
    (default: the current time). The signature is checked before the timestamp, so a
    tolerance error means an authentic delivery that is stale or a skewed clock.
    ``body`` must be the raw bytes received: a ``str`` raises ``TypeError``, an empty
    secret ``ValueError`` (both are receiver bugs, not bad deliveries).
    """
    _require_bytes(body)
    _require_secret(secret)
    timestamp, candidates = _parse(header)
    _check_signature(signature(secret, timestamp, body), candidates)
    _check_tolerance(timestamp, tolerance, time.time() if now is None else now)
    return timestamp


@functools.lru_cache(maxsize=4096)
def _keyed(secret: str) -> hmac.HMAC:
    """An HMAC already keyed with ``secret``, made once per secret: each signature copies it
    (keying costs as much as hashing a short body again)."""
    return hmac.new(secret.encode("utf-8"), digestmod=hashlib.sha256)


def _require_bytes(body: object) -> None:
    if not isinstance(body, bytes):
        raise TypeError(
            f"body must be the raw request body as bytes, not {type(body).__name__}: "
            "the signature covers the exact bytes sent"
        )


def _require_secret(secret: str) -> None:
    if not secret:
        raise ValueError("the webhook secret is empty; it starts with 'whsec_'")


def _parse(header: str | None) -> tuple[int, list[str]]:
    if not header or not header.strip(_OPTIONAL_WHITESPACE):
        raise MalformedHeaderError(f"the {HEADER} header is missing or empty")
    pairs = [item.strip(_OPTIONAL_WHITESPACE).partition("=") for item in header.split(",")]
    timestamps = [value for key, sep, value in pairs if sep and key == "t"]
    candidates = [value for key, sep, value in pairs if sep and key == SCHEME]
    timestamp = _parse_timestamp(timestamps)
    if not candidates:
        raise MalformedHeaderError(f"the {HEADER} header has no {SCHEME}= signature")
    return timestamp, candidates


def _parse_timestamp(values: list[str]) -> int:
    if len(values) != 1:
        raise MalformedHeaderError(
            f"the {HEADER} header must have exactly one t= timestamp, found {len(values)}"
        )
    if not _TIMESTAMP.fullmatch(values[0]):
        raise MalformedHeaderError(
            f"the {HEADER} header's t= is not a whole number of seconds: {values[0][:40]!r}"
        )
    return int(values[0])


def _check_signature(expected: str, candidates: list[str]) -> None:
    # compare_digest needs ASCII str; a non-ASCII candidate can never equal a hex digest.
    if not any(c.isascii() and hmac.compare_digest(expected, c) for c in candidates):
        raise SignatureMismatchError(
            f"no {SCHEME}= signature matches the body and secret "
            "(wrong secret, or the body was changed, decoded or re-serialised)"
        )


def _check_tolerance(timestamp: int, tolerance: int, now: float) -> None:
    within = abs(now - timestamp) <= tolerance  # False for a NaN clock too
    if not within:
        raise TimestampToleranceError(
            f"the signed timestamp {timestamp} is {_age(timestamp, now)}; "
            f"more than {tolerance} s either way is rejected (replay, or a clock is wrong)"
        )


def _age(timestamp: int, now: float) -> str:
    delta = now - timestamp
    return f"{delta:.0f} s old" if delta >= 0 else f"{-delta:.0f} s in the future"
