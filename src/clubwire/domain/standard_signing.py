"""Standard Webhooks 1.0 signatures, sent beside ``X-Service-Signature`` (issue 14).

Every delivery also carries ``webhook-id`` (the event's ``evt_`` id), ``webhook-timestamp``
(the same unix seconds as ``X-Service-Signature``'s ``t``) and ``webhook-signature:
v1,<base64>``, the base64 HMAC-SHA256 of ``b"<id>.<timestamp>." + body``. Unlike our own
scheme, the HMAC key is what the base64 after ``whsec_`` decodes to, as the specification
reads a secret; so the ``standardwebhooks`` package and Svix's libraries verify deliveries
unchanged. A secret whose tail is not standard base64 (clubwire never issued one) gets no
``webhook-signature``: the libraries disagree on how to read it, so any signature would fail
somewhere, and a missing header says so plainly.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac

from clubwire.domain import webhook_secrets

__all__ = [
    "HEADERS",
    "ID_HEADER",
    "SCHEME",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "headers",
    "key",
    "sign",
]

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
HEADERS = (ID_HEADER, TIMESTAMP_HEADER, SIGNATURE_HEADER)
SCHEME = "v1"


def headers(secret: str, message_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three ``webhook-*`` headers (two when ``secret`` cannot key this scheme)."""
    found = {ID_HEADER: message_id, TIMESTAMP_HEADER: str(timestamp)}
    signature = sign(secret, message_id, timestamp, body)
    if signature is not None:
        found[SIGNATURE_HEADER] = signature
    return found


def sign(secret: str, message_id: str, timestamp: int, body: bytes) -> str | None:
    """The ``webhook-signature`` value ``v1,<base64>``; None when ``secret`` has no key."""
    keyed = _keyed(secret)
    if keyed is None:
        return None
    mac = keyed.copy()
    mac.update(f"{message_id}.{timestamp}.".encode())
    mac.update(body)
    return f"{SCHEME},{base64.b64encode(mac.digest()).decode('ascii')}"


def key(secret: str) -> bytes | None:
    """The HMAC key the specification reads from ``secret``: the bytes the standard base64
    after ``whsec_`` encodes; None when that is not padded standard base64, or is empty."""
    try:
        decoded = base64.b64decode(secret.removeprefix(webhook_secrets.PREFIX), validate=True)
    except (binascii.Error, ValueError):  # ValueError: a non-ASCII character
        return None
    return decoded or None


@functools.lru_cache(maxsize=4096)
def _keyed(secret: str) -> hmac.HMAC | None:
    """An HMAC already keyed for ``secret``, made once per secret: every attempt copies it."""
    found = key(secret)
    return None if found is None else hmac.new(found, digestmod=hashlib.sha256)
