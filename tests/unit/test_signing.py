"""Unit tests for webhook signing: vectors, round trips, tolerance, parsing, Stripe compat."""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import math
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import stripe
from hypothesis import given
from hypothesis import strategies as st

from clubwire import signing

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
T = 1_768_329_000  # 2026-01-13T18:30:00Z
BODY = b'{"id":"evt_1","event":"ping"}'
SRC = Path(__file__).resolve().parents[2] / "src"

BASE62 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
secrets_ = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=80)
whsec_secrets = st.text(BASE62, min_size=32, max_size=48).map(lambda s: "whsec_" + s)
timestamps = st.integers(min_value=0, max_value=10**20 - 1)
utf8_bodies = st.text(st.characters(exclude_categories=["Cs"])).map(str.encode)


def independent_hex(secret: str, timestamp: int, body: bytes) -> str:
    message = str(timestamp).encode("ascii") + b"." + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def header_for(body: bytes = BODY, timestamp: int = T, secret: str = SECRET) -> str:
    return signing.sign(secret, timestamp, body)


# --- known vectors -----------------------------------------------------------------------


KNOWN = [
    (
        "whsec_test_secret",
        1768329000,
        b"{}",
        "ef6db553d5f0199f2f3df82a0b13f371b2692fb6528878b40aeea7d8b55b738b",
    ),
    (
        "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        1700000000,
        b'{"id":"evt_1"}',
        "211d3e17c85047207929a88be720ec275a19e8522b050ad76d8f99d78305a21c",
    ),
    ("k", 0, b"", "6b4a4b8b3c40f1e8f53a3d36682e5f99f7ad2ac1df1c93dfe336f329167641e7"),
]


@pytest.mark.parametrize(("secret", "timestamp", "body", "hex_"), KNOWN)
def test_signature_matches_a_fixed_vector(
    secret: str, timestamp: int, body: bytes, hex_: str
) -> None:
    assert signing.signature(secret, timestamp, body) == hex_
    assert independent_hex(secret, timestamp, body) == hex_


@pytest.mark.parametrize(("secret", "timestamp", "body", "hex_"), KNOWN)
def test_sign_is_t_then_v1(secret: str, timestamp: int, body: bytes, hex_: str) -> None:
    assert signing.sign(secret, timestamp, body) == f"t={timestamp},v1={hex_}"


def test_the_key_is_the_whole_secret_including_the_whsec_prefix() -> None:
    assert signing.signature(SECRET, T, BODY) == independent_hex(SECRET, T, BODY)
    assert signing.signature(SECRET, T, BODY) != independent_hex(SECRET[6:], T, BODY)


def test_the_key_is_the_utf8_of_the_secret() -> None:
    assert signing.signature("whsec_ünï", T, BODY) == independent_hex("whsec_ünï", T, BODY)


def test_constants() -> None:
    assert signing.HEADER == "X-Service-Signature"
    assert signing.DEFAULT_TOLERANCE == 300


@given(secret=secrets_, timestamp=timestamps, body=st.binary())
def test_signature_agrees_with_an_independent_hmac(
    secret: str, timestamp: int, body: bytes
) -> None:
    assert signing.signature(secret, timestamp, body) == independent_hex(secret, timestamp, body)


# --- round trip --------------------------------------------------------------------------


@given(secret=secrets_, timestamp=timestamps, body=st.binary())
def test_verify_accepts_what_sign_produces(secret: str, timestamp: int, body: bytes) -> None:
    header = signing.sign(secret, timestamp, body)
    assert signing.verify(body, header, secret, now=timestamp) == timestamp


@given(
    secret=secrets_,
    timestamp=st.integers(min_value=0, max_value=2**40),
    body=st.binary(),
    skew=st.integers(min_value=-300, max_value=300),
)
def test_verify_accepts_any_skew_within_tolerance(
    secret: str, timestamp: int, body: bytes, skew: int
) -> None:
    header = signing.sign(secret, timestamp, body)
    assert signing.verify(body, header, secret, now=timestamp + skew) == timestamp


def test_verify_uses_the_current_time_by_default() -> None:
    now = int(time.time())
    assert signing.verify(BODY, header_for(timestamp=now), SECRET) == now


# --- tolerance ---------------------------------------------------------------------------


@pytest.mark.parametrize("skew", [0, 1, 299, 300, -1, -299, -300, 299.9, -300.0])
def test_within_300_seconds_either_way_is_accepted(skew: float) -> None:
    assert signing.verify(BODY, header_for(), SECRET, now=T + skew) == T


@pytest.mark.parametrize("skew", [301, -301, 300.001, -300.001, 10**6, -(10**6)])
def test_more_than_300_seconds_either_way_is_rejected(skew: float) -> None:
    with pytest.raises(signing.TimestampToleranceError, match="more than 300 s"):
        signing.verify(BODY, header_for(), SECRET, now=T + skew)


def test_the_tolerance_message_says_old_or_future() -> None:
    with pytest.raises(signing.TimestampToleranceError, match="301 s old"):
        signing.verify(BODY, header_for(), SECRET, now=T + 301)
    with pytest.raises(signing.TimestampToleranceError, match="301 s in the future"):
        signing.verify(BODY, header_for(), SECRET, now=T - 301)


def test_a_custom_tolerance_is_honoured() -> None:
    assert signing.verify(BODY, header_for(), SECRET, tolerance=10, now=T + 10) == T
    with pytest.raises(signing.TimestampToleranceError):
        signing.verify(BODY, header_for(), SECRET, tolerance=10, now=T + 11)
    assert signing.verify(BODY, header_for(), SECRET, tolerance=3600, now=T + 3600) == T


@pytest.mark.parametrize("now", [math.nan, math.inf, -math.inf])
def test_a_non_finite_clock_is_rejected(now: float) -> None:
    with pytest.raises(signing.TimestampToleranceError):
        signing.verify(BODY, header_for(), SECRET, now=now)


def test_a_stale_header_with_a_bad_signature_reports_the_signature() -> None:
    header = header_for(secret="whsec_other")
    with pytest.raises(signing.SignatureMismatchError):
        signing.verify(BODY, header, SECRET, now=T + 10_000)


# --- signature mismatch ------------------------------------------------------------------


def test_a_tampered_body_is_rejected() -> None:
    with pytest.raises(signing.SignatureMismatchError, match="no v1= signature matches"):
        signing.verify(BODY + b" ", header_for(), SECRET, now=T)


@given(body=st.binary(), other=st.binary())
def test_any_other_body_is_rejected(body: bytes, other: bytes) -> None:
    if body != other:
        with pytest.raises(signing.SignatureMismatchError):
            signing.verify(other, header_for(body), SECRET, now=T)


def test_a_wrong_secret_is_rejected() -> None:
    with pytest.raises(signing.SignatureMismatchError):
        signing.verify(BODY, header_for(), SECRET + "x", now=T)


def test_the_secret_without_its_prefix_is_rejected() -> None:
    with pytest.raises(signing.SignatureMismatchError):
        signing.verify(BODY, header_for(), SECRET.removeprefix("whsec_"), now=T)


def test_a_header_whose_t_was_changed_is_rejected() -> None:
    hex_ = signing.signature(SECRET, T, BODY)
    with pytest.raises(signing.SignatureMismatchError):
        signing.verify(BODY, f"t={T + 1},v1={hex_}", SECRET, now=T)


MANGLES: list[Callable[[str], str]] = [
    str.upper,
    lambda h: h[:-1],
    lambda h: h + "0",
    lambda h: h[::-1],
    lambda h: h[:32],
    lambda h: f'"{h}"',
]


@pytest.mark.parametrize("mangle", MANGLES)
def test_a_mangled_v1_is_rejected(mangle: Callable[[str], str]) -> None:
    hex_ = mangle(signing.signature(SECRET, T, BODY))
    with pytest.raises(signing.SignatureMismatchError):
        signing.verify(BODY, f"t={T},v1={hex_}", SECRET, now=T)


def test_an_empty_v1_is_a_mismatch() -> None:
    with pytest.raises(signing.SignatureMismatchError):
        signing.verify(BODY, f"t={T},v1=", SECRET, now=T)


def test_a_non_ascii_v1_is_a_mismatch_not_a_crash() -> None:
    with pytest.raises(signing.SignatureMismatchError):
        signing.verify(BODY, f"t={T},v1=é\udcff", SECRET, now=T)


# --- several signatures and other schemes ------------------------------------------------


def test_one_matching_v1_among_several_is_enough() -> None:
    good = signing.signature(SECRET, T, BODY)
    bad = signing.signature("whsec_old", T, BODY)
    for header in (f"t={T},v1={bad},v1={good}", f"t={T},v1={good},v1={bad}"):
        assert signing.verify(BODY, header, SECRET, now=T) == T


def test_unknown_schemes_are_ignored() -> None:
    good = signing.signature(SECRET, T, BODY)
    header = f"t={T},v0=deadbeef,v1={good},v2=whatever,junk"
    assert signing.verify(BODY, header, SECRET, now=T) == T


def test_a_matching_signature_under_another_scheme_does_not_count() -> None:
    good = signing.signature(SECRET, T, BODY)
    with pytest.raises(signing.MalformedHeaderError, match="no v1="):
        signing.verify(BODY, f"t={T},v0={good}", SECRET, now=T)


def test_the_order_of_items_does_not_matter() -> None:
    good = signing.signature(SECRET, T, BODY)
    assert signing.verify(BODY, f"v1={good},t={T}", SECRET, now=T) == T


def test_a_t_with_leading_zeros_is_read_as_its_value() -> None:
    good = signing.signature(SECRET, T, BODY)
    assert signing.verify(BODY, f"t=000{T},v1={good}", SECRET, now=T) == T


# --- whitespace --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "template",
    ["t={t}, v1={s}", " t={t},v1={s} ", "t={t} ,\tv1={s}", "\tt={t}\t,  v1={s}  "],
)
def test_spaces_and_tabs_around_items_are_tolerated(template: str) -> None:
    header = template.format(t=T, s=signing.signature(SECRET, T, BODY))
    assert signing.verify(BODY, header, SECRET, now=T) == T


def test_whitespace_inside_an_item_is_not_tolerated() -> None:
    good = signing.signature(SECRET, T, BODY)
    with pytest.raises(signing.MalformedHeaderError):
        signing.verify(BODY, f"t = {T},v1={good}", SECRET, now=T)
    with pytest.raises(signing.SignatureMismatchError):
        signing.verify(BODY, f"t={T},v1= {good}", SECRET, now=T)


# --- malformed headers -------------------------------------------------------------------

GOOD_HEX = "0" * 64


@pytest.mark.parametrize("header", [None, "", "   ", "\t", ","])
def test_a_missing_or_empty_header_is_malformed(header: str | None) -> None:
    with pytest.raises(signing.MalformedHeaderError):
        signing.verify(BODY, header, SECRET, now=T)


@pytest.mark.parametrize(
    "header",
    [
        f"v1={GOOD_HEX}",
        f"t,v1={GOOD_HEX}",
        f"t=,v1={GOOD_HEX}",
        f"t=abc,v1={GOOD_HEX}",
        f"t=-5,v1={GOOD_HEX}",
        f"t=+5,v1={GOOD_HEX}",
        f"t=1.5,v1={GOOD_HEX}",
        f"t=1_000,v1={GOOD_HEX}",
        f"t=1e9,v1={GOOD_HEX}",
        f"t=0x10,v1={GOOD_HEX}",
        f"t=١٢٣,v1={GOOD_HEX}",
        f"t={'9' * 21},v1={GOOD_HEX}",
        f"t=1,t=2,v1={GOOD_HEX}",
        f"t={T},t={T},v1={GOOD_HEX}",
        f"T={T},v1={GOOD_HEX}",
        "t=123",
        "t=123,",
        "t=123,v1",
        f"t=123,V1={GOOD_HEX}",
        f"t=123,v0={GOOD_HEX}",
        "garbage",
    ],
)
def test_a_malformed_header_is_rejected(header: str) -> None:
    with pytest.raises(signing.MalformedHeaderError):
        signing.verify(BODY, header, SECRET, now=T)


def test_malformed_messages_name_what_is_wrong() -> None:
    with pytest.raises(signing.MalformedHeaderError, match="missing or empty"):
        signing.verify(BODY, "", SECRET, now=T)
    with pytest.raises(signing.MalformedHeaderError, match="exactly one t="):
        signing.verify(BODY, "v1=00", SECRET, now=T)
    with pytest.raises(signing.MalformedHeaderError, match="not a whole number"):
        signing.verify(BODY, "t=soon,v1=00", SECRET, now=T)
    with pytest.raises(signing.MalformedHeaderError, match="no v1= signature"):
        signing.verify(BODY, "t=1", SECRET, now=T)


def test_the_error_classes_are_signature_errors_and_value_errors() -> None:
    for cls in (
        signing.MalformedHeaderError,
        signing.TimestampToleranceError,
        signing.SignatureMismatchError,
    ):
        assert issubclass(cls, signing.SignatureError)
    assert issubclass(signing.SignatureError, ValueError)


# --- verify never raises anything but SignatureError -------------------------------------

header_items = st.one_of(
    st.text(max_size=30),
    st.builds(lambda v: f"t={v}", st.one_of(st.text(max_size=25), st.integers().map(str))),
    st.builds(lambda v: f"v1={v}", st.one_of(st.text(max_size=70), st.just(GOOD_HEX))),
    st.sampled_from(["t", "v1", "=", "t=", "v1=", " ", "\t", "t=1768329000", "v0=00"]),
)
structured_headers = st.lists(header_items, max_size=6).map(",".join)
clocks = st.one_of(st.none(), st.floats(), st.integers(-(10**30), 10**30))


@given(header=st.one_of(st.text(), structured_headers), body=st.binary(), now=clocks)
def test_verify_raises_only_signature_error_for_any_header(
    header: str, body: bytes, now: float | None
) -> None:
    with contextlib.suppress(signing.SignatureError):
        signing.verify(body, header, SECRET, now=now)


@given(body=st.binary(), now=clocks, skew=st.integers(-1000, 1000))
def test_verify_is_total_near_a_valid_header(body: bytes, now: float | None, skew: int) -> None:
    header = signing.sign(SECRET, T + skew, body)
    with contextlib.suppress(signing.TimestampToleranceError):
        assert signing.verify(body, header, SECRET, now=now) == T + skew


# --- receiver misuse ---------------------------------------------------------------------


@pytest.mark.parametrize("body", [BODY.decode(), bytearray(BODY), memoryview(BODY), None])
def test_a_body_that_is_not_bytes_is_a_type_error(body: object) -> None:
    with pytest.raises(TypeError, match="raw request body as bytes, not"):
        signing.verify(body, header_for(), SECRET, now=T)  # type: ignore[arg-type]


def test_signing_a_str_body_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not str"):
        signing.sign(SECRET, T, "{}")  # type: ignore[arg-type]


def test_an_empty_secret_is_a_value_error_not_a_signature_error() -> None:
    with pytest.raises(ValueError, match="secret is empty") as info:
        signing.verify(BODY, header_for(), "", now=T)
    assert not isinstance(info.value, signing.SignatureError)
    with pytest.raises(ValueError, match="secret is empty"):
        signing.sign("", T, BODY)


def test_a_negative_timestamp_cannot_be_signed() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        signing.sign(SECRET, -1, BODY)


# --- a Stripe-style verifier accepts our signatures --------------------------------------


@given(secret=whsec_secrets, body=utf8_bodies)
def test_stripe_verifies_our_header(secret: str, body: bytes) -> None:
    header = signing.sign(secret, int(time.time()), body)
    assert stripe.WebhookSignature.verify_header(body, header, secret, 300)


def test_stripe_verifies_our_header_for_a_realistic_envelope() -> None:
    body = (
        '{"id":"evt_01J0000000000000000000000","event":"registration.created",'
        '"createdAt":"2026-01-13T18:30:00.000Z","organizationId":"org_abc",'
        '"orderingKey":"invoice:inv_abc","sequence":1,'
        '"data":{"member":{"name":"Zoë Ærøskøbing","email":"zoe@example.org"}}}'
    ).encode()
    header = signing.sign(SECRET, int(time.time()), body)
    assert stripe.WebhookSignature.verify_header(body, header, SECRET, 300)


def test_stripe_rejects_our_header_with_another_secret() -> None:
    header = signing.sign(SECRET, int(time.time()), BODY)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(BODY, header, SECRET + "x", 300)


@given(secret=whsec_secrets, body=st.text(st.characters(exclude_categories=["Cs"])))
def test_we_verify_a_header_stripe_generates(secret: str, body: str) -> None:
    header = stripe.WebhookSignature.generate_signature_header(body, secret, timestamp=T)
    assert header == signing.sign(secret, T, body.encode())
    assert signing.verify(body.encode(), header, secret, now=T) == T


# --- importable without the package's dependencies ---------------------------------------

HEAVY = "{'pydantic','sqlalchemy','fastapi','aiohttp','orjson','cryptography'}"


def run_python(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def test_importing_signing_loads_none_of_the_heavy_dependencies() -> None:
    code = (
        "import sys; import clubwire.signing; "
        f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY}))"
    )
    assert run_python("-c", code) == "[]"


def test_signing_needs_only_the_standard_library() -> None:
    code = (
        f"import sys; sys.path.insert(0, {str(SRC)!r}); import clubwire.signing; "
        "print(sorted(m for m in sys.modules "
        "if m.split('.')[0] not in sys.stdlib_module_names | {'__main__'}))"
    )
    # -S: no site-packages at all, -E: ignore PYTHONPATH and friends.
    assert run_python("-S", "-E", "-c", code) == "['clubwire', 'clubwire.signing']"
