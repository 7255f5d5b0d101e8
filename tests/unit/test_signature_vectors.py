"""The published vectors in docs/webhook-signature-vectors.md agree with clubwire.signing.

Each ``### Vector …`` section holds a ``text`` block (the body as it travels) and a ``json``
block with ``secret``, ``timestamp``, ``body``, optional ``body_hex`` and ``header``
(read by ``tests/signature_vectors.py``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re

import orjson
import pytest
import stripe

from clubwire import signing
from clubwire.domain import event_schemas
from tests.signature_vectors import DOC_TEXT, VECTORS, Vector, blocks

REQUIRED = {"secret", "timestamp", "body", "header"}
ENVELOPE = {"id", "event", "createdAt", "organizationId", "data"}
# Every event but ping also names its resource and its place among the resource's events.
ORDERED = ENVELOPE | {"orderingKey", "sequence"}
by_vector = pytest.mark.parametrize("vector", VECTORS, ids=[v.title for v in VECTORS])


def independent_hex(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


@by_vector
def test_sign_produces_the_published_header(vector: Vector) -> None:
    assert signing.sign(vector.secret, vector.timestamp, vector.body) == vector.header


@by_vector
def test_the_published_header_is_an_independent_hmac(vector: Vector) -> None:
    hex_ = independent_hex(vector.secret, vector.timestamp, vector.body)
    assert vector.header == f"t={vector.timestamp},v1={hex_}"


@by_vector
def test_verify_accepts_the_published_header(vector: Vector) -> None:
    assert signing.verify(vector.body, vector.header, vector.secret, now=vector.timestamp) == (
        vector.timestamp
    )


@by_vector
def test_stripe_accepts_the_published_header(vector: Vector) -> None:
    # tolerance=None: Stripe then checks only the signature, not the (old) timestamp.
    assert stripe.WebhookSignature.verify_header(vector.body, vector.header, vector.secret, None)


@by_vector
def test_the_vector_has_the_documented_keys(vector: Vector) -> None:
    assert REQUIRED <= vector.fields.keys() <= REQUIRED | {"body_hex"}
    assert vector.secret.startswith("whsec_")
    assert isinstance(vector.fields["body"], str)


@by_vector
def test_the_text_block_shows_the_body(vector: Vector) -> None:
    assert vector.texts == [vector.body.decode("utf-8")]


@by_vector
def test_body_hex_is_given_exactly_where_the_body_is_not_single_line_ascii(
    vector: Vector,
) -> None:
    plain = vector.body.isascii() and b"\n" not in vector.body
    assert ("body_hex" in vector.fields) == (not plain)
    if not plain:
        assert bytes.fromhex(str(vector.fields["body_hex"])) == vector.body


def test_there_are_at_least_four_vectors_and_every_json_block_is_one() -> None:
    assert len(VECTORS) >= 4
    assert len(blocks(DOC_TEXT, "json")) == len(VECTORS)


def test_the_vectors_include_the_required_cases() -> None:
    bodies = [v.body for v in VECTORS]
    assert b"{}" in bodies
    assert any(not b.isascii() for b in bodies)
    envelopes = [json.loads(b) for b in bodies]
    assert any(
        e.keys() == ORDERED and e["id"].startswith("evt_") and e["event"] == "registration.created"
        for e in envelopes
    )


def test_the_envelope_vectors_are_the_catalog_examples_byte_for_byte() -> None:
    """So that a receiver can test its parsing with them too, not only its signing."""
    envelopes = [v.body for v in VECTORS if json.loads(v.body).keys() in (ENVELOPE, ORDERED)]
    kinds = [json.loads(body)["event"] for body in envelopes]
    assert kinds == ["registration.created", "ping"]
    assert envelopes == [orjson.dumps(event_schemas.example(kind)) for kind in kinds]


def test_every_header_quoted_in_the_doc_is_a_vector_header() -> None:
    quoted = set(re.findall(r"t=\d+,v1=[0-9a-f]+", DOC_TEXT))
    assert quoted == {v.header for v in VECTORS}


def test_every_digest_in_the_doc_is_a_vector_or_the_prefix_mistake() -> None:
    known = {v.header.partition("v1=")[2] for v in VECTORS}
    mistakes = {
        independent_hex(v.secret.removeprefix("whsec_"), v.timestamp, v.body) for v in VECTORS
    }
    quoted = set(re.findall(r"\b[0-9a-f]{64}\b", DOC_TEXT))
    assert quoted <= known | mistakes
    assert quoted & mistakes


def test_the_worked_example_is_vector_1() -> None:
    first = VECTORS[0]
    assert f"key            = {first.secret} " in DOC_TEXT
    assert f"string to sign = {first.timestamp}.{first.body.decode()}\n" in DOC_TEXT
    assert f"header         = {first.header}\n" in DOC_TEXT
