"""The Standard Webhooks section of docs/webhook-signature-vectors.md: its table signs each
published vector the Standard Webhooks way, and clubwire, the ``standardwebhooks`` package
and an independent HMAC all agree with it, as with its worked example and the specification's
own vector."""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from datetime import UTC, datetime

import pytest
import standardwebhooks

from clubwire.domain import standard_signing
from tests.signature_vectors import DOC_TEXT, VECTORS, Vector

SECTION = DOC_TEXT[DOC_TEXT.index("## Standard Webhooks\n") : DOC_TEXT.index("## Vectors\n")]
ROW = re.compile(r"^\| (\d+) \| `(\S+)` \| `(\d+)` \| `(v1,\S+)` \|$", re.MULTILINE)
QUOTED = re.compile(r"v1,[A-Za-z0-9+/]{43}=")
TEXT = re.compile(r"^```text\n(.*?)^```$", re.MULTILINE | re.DOTALL)
ROWS = {
    int(n): (message_id, int(t), signature) for n, message_id, t, signature in ROW.findall(SECTION)
}
by_vector = pytest.mark.parametrize(
    ("number", "vector"), list(enumerate(VECTORS, 1)), ids=[v.title for v in VECTORS]
)


def independent(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(digest.digest()).decode()


def keyed_with_text(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    """The usual mistake: the HMAC keyed as ``X-Service-Signature`` is."""
    digest = hmac.new(secret.encode(), f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)
    return "v1," + base64.b64encode(digest.digest()).decode()


def fields(block: str) -> dict[str, str]:
    """A worked example's ``name = value`` lines (a value ends at two spaces)."""
    pairs = (line.split(" = ", 1) for line in block.splitlines())
    return {name.strip(): value.split("   ")[0].strip() for name, value in pairs}


def test_every_vector_has_one_row() -> None:
    assert sorted(ROWS) == list(range(1, len(VECTORS) + 1))


@by_vector
def test_the_row_is_what_clubwire_sends(number: int, vector: Vector) -> None:
    message_id, timestamp, signature = ROWS[number]
    assert timestamp == vector.timestamp
    sent = standard_signing.sign(vector.secret, message_id, timestamp, vector.body)
    assert sent == signature == independent(vector.secret, message_id, timestamp, vector.body)


@by_vector
def test_the_library_makes_and_accepts_the_row(number: int, vector: Vector) -> None:
    message_id, timestamp, signature = ROWS[number]
    webhook = standardwebhooks.Webhook(vector.secret)
    at = datetime.fromtimestamp(timestamp, UTC)
    assert webhook.sign(message_id, at, vector.body.decode()) == signature


def test_the_envelopes_are_signed_with_their_own_id() -> None:
    for number, vector in enumerate(VECTORS, 1):
        if vector.body.startswith(b'{"id":"'):
            assert f'"id":"{ROWS[number][0]}"'.encode() in vector.body


def test_the_worked_example_is_vector_1() -> None:
    worked = fields(TEXT.findall(SECTION)[0])
    first, (message_id, timestamp, signature) = VECTORS[0], ROWS[1]
    assert worked["secret"] == first.secret
    assert bytes.fromhex(worked["key (hex)"]) == standard_signing.key(first.secret)
    assert (worked["webhook-id"], int(worked["webhook-timestamp"])) == (message_id, timestamp)
    assert worked["string to sign"] == f"{message_id}.{timestamp}.{first.body.decode()}"
    assert worked["webhook-signature"] == signature


def test_the_specifications_vector_is_reproduced() -> None:
    spec = fields(TEXT.findall(SECTION)[1])
    signed = standard_signing.sign(
        spec["secret"], spec["webhook-id"], int(spec["webhook-timestamp"]), spec["body"].encode()
    )
    assert signed == spec["webhook-signature"] == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_every_signature_quoted_is_a_row_the_specs_or_the_mistake() -> None:
    rows = {signature for _, _, signature in ROWS.values()}
    first, (message_id, timestamp, _) = VECTORS[0], ROWS[1]
    mistake = keyed_with_text(first.secret, message_id, timestamp, first.body)
    spec = fields(TEXT.findall(SECTION)[1])["webhook-signature"]
    assert set(QUOTED.findall(DOC_TEXT)) == rows | {mistake, spec}
