"""Standard Webhooks signatures (``clubwire.domain.standard_signing``), the headers every attempt
carries (``services.delivery.attempts.headers``) and the secrets that key them, checked against the
specification's published vector, an independent HMAC and the ``standardwebhooks`` package."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from datetime import UTC, datetime

import pytest
import standardwebhooks
import stripe
from hypothesis import given
from hypothesis import strategies as st

from clubwire import ids, signing
from clubwire.domain import base62, event_catalog, standard_signing, webhook_secrets
from clubwire.domain.delivering import Job, Status, Trigger
from clubwire.services.delivery import attempts

# The vector of the Standard Webhooks libraries' own tests (test_sign_function).
SPEC_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SPEC_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
SPEC_TIMESTAMP = 1614265330
SPEC_BODY = b'{"test": 2432232314}'
SPEC_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

BASE62 = base62.ALPHABET
base62_secrets = st.text(BASE62, min_size=webhook_secrets.LENGTH, max_size=webhook_secrets.LENGTH)
message_ids = st.text(BASE62, min_size=1, max_size=40).map(lambda s: "evt_" + s)
bodies = st.binary(max_size=2000)
timestamps = st.integers(min_value=0, max_value=2**40)
UNKEYED = [
    "whsec_the-right-one",  # "-" is base64url, not base64
    "whsec_abc",  # not whole base64 quanta
    "whsec_",  # nothing to decode
    "whsec_" + "é" * 32,  # not ASCII
    "whsec_Qm3tZ8vR1cXy6LpN0aK4dF7gH2jW9sB_",
]


def independent(secret: str, message_id: str, timestamp: int, body: bytes) -> str:
    key = base64.b64decode(secret.removeprefix("whsec_"))
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def library_verifies(secret: str, headers: dict[str, str], body: bytes) -> bool:
    try:
        standardwebhooks.Webhook(secret).verify(body, headers, json_parse=False)
    except standardwebhooks.WebhookVerificationError:
        return False
    return True


def test_the_specifications_published_vector() -> None:
    assert standard_signing.sign(SPEC_SECRET, SPEC_ID, SPEC_TIMESTAMP, SPEC_BODY) == SPEC_SIGNATURE


def test_the_key_is_the_decoded_tail_not_the_whole_string() -> None:
    key = standard_signing.key(SPEC_SECRET)
    assert key == base64.b64decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
    assert key is not None
    assert len(key) == 24
    whole = hmac.new(SPEC_SECRET.encode(), b"x", hashlib.sha256).digest()
    assert hmac.new(key, b"x", hashlib.sha256).digest() != whole


@given(base62_secrets, message_ids, timestamps, bodies)
def test_sign_is_the_independent_hmac(
    tail: str, message_id: str, timestamp: int, body: bytes
) -> None:
    secret = "whsec_" + tail
    expected = independent(secret, message_id, timestamp, body)
    assert standard_signing.sign(secret, message_id, timestamp, body) == expected


@given(base62_secrets, message_ids, st.text().map(str.encode))
def test_the_library_verifies_the_headers_and_its_own_signature_is_ours(
    tail: str, message_id: str, body: bytes
) -> None:
    secret, now = "whsec_" + tail, int(time.time())
    headers = standard_signing.headers(secret, message_id, now, body)
    assert library_verifies(secret, headers, body)
    at = datetime.fromtimestamp(now, UTC)
    ours = headers[standard_signing.SIGNATURE_HEADER]
    assert standardwebhooks.Webhook(secret).sign(message_id, at, body.decode()) == ours


def test_every_issued_secret_keys_both_schemes() -> None:
    for _ in range(200):
        secret = webhook_secrets.generate(ids.random_base62)
        key = standard_signing.key(secret)
        assert key is not None
        assert len(key) == 24  # the specification's minimum
        assert base64.b64encode(key).decode() == secret.removeprefix("whsec_")


@pytest.mark.parametrize("secret", UNKEYED)
def test_a_secret_that_is_not_base64_gets_no_signature_but_the_other_headers(
    secret: str,
) -> None:
    assert standard_signing.key(secret) is None
    assert standard_signing.sign(secret, "evt_1", 1, b"{}") is None
    assert standard_signing.headers(secret, "evt_1", 1, b"{}") == {
        "webhook-id": "evt_1",
        "webhook-timestamp": "1",
    }


def test_a_tampered_id_timestamp_or_body_or_another_secret_fails() -> None:
    secret, now, body = webhook_secrets.generate(ids.random_base62), int(time.time()), b"{}"
    good = standard_signing.headers(secret, "evt_1", now, body)
    assert library_verifies(secret, good, body)
    assert not library_verifies(secret, good, b"{ }")
    assert not library_verifies(secret, {**good, "webhook-id": "evt_2"}, body)
    assert not library_verifies(secret, {**good, "webhook-timestamp": str(now + 1)}, body)
    other = webhook_secrets.generate(ids.random_base62)
    assert not library_verifies(other, good, body)


# --- the headers of an attempt ------------------------------------------------------------


def job(body: bytes) -> Job:
    return Job(
        delivery_id="dlv_7hQ2mX9kV4pL8nR3wZ5c",
        club_id="org_1",
        endpoint_id="we_1",
        kind="registration.created",
        url="https://hooks.example/x",
        secret_sealed="sealed",
        body=body,
        status=Status.PENDING,
        attempts_made=0,
        trigger=Trigger.SCHEDULED,
        lease_until=datetime(2026, 1, 13, tzinfo=UTC),
    )


ENVELOPE = b'{"id":"evt_2Rk8fV1nQ7xLm3Pz9WcT","event":"registration.created","data":{}}'


def test_an_attempt_carries_both_schemes_over_one_timestamp() -> None:
    secret, now = webhook_secrets.generate(ids.random_base62), int(time.time())
    sent = attempts.headers(job(ENVELOPE), secret, now)
    assert sent["webhook-id"] == event_catalog.id_of(ENVELOPE) == "evt_2Rk8fV1nQ7xLm3Pz9WcT"
    assert sent["webhook-timestamp"] == str(now)
    assert signing.verify(ENVELOPE, sent[signing.HEADER], secret) == now
    assert stripe.WebhookSignature.verify_header(ENVELOPE, sent[signing.HEADER], secret, 300)
    assert library_verifies(secret, sent, ENVELOPE)
    assert sent["webhook-signature"] == independent(secret, sent["webhook-id"], now, ENVELOPE)


def test_the_spec_headers_are_as_before() -> None:
    secret = "whsec_5WbX5kEWLlfzsGNjH64I8lOOqUB6e8FH"
    sent = attempts.headers(job(ENVELOPE), secret, 1768329000)
    assert {name: value for name, value in sent.items() if not name.startswith("webhook-")} == {
        "Content-Type": "application/json",
        "User-Agent": "Service-Webhooks/1.0",
        "X-Service-Event": "registration.created",
        "X-Service-Delivery": "dlv_7hQ2mX9kV4pL8nR3wZ5c",
        "X-Service-Signature": signing.sign(secret, 1768329000, ENVELOPE),
    }


def test_a_body_that_is_not_an_envelope_is_identified_by_its_delivery() -> None:
    secret = webhook_secrets.generate(ids.random_base62)
    assert attempts.headers(job(b"{}"), secret, 1)["webhook-id"] == "dlv_7hQ2mX9kV4pL8nR3wZ5c"


def test_a_secret_from_before_that_is_not_base64_still_signs_our_scheme() -> None:
    sent = attempts.headers(job(ENVELOPE), "whsec_the-right-one", int(time.time()))
    assert "webhook-signature" not in sent
    assert signing.verify(ENVELOPE, sent[signing.HEADER], "whsec_the-right-one")
    with pytest.raises(standardwebhooks.WebhookVerificationError, match="Missing required"):
        standardwebhooks.Webhook(webhook_secrets.PREFIX + "A" * 32).verify(ENVELOPE, sent)
