"""Unit tests for the API key format ``cw_live_<prefix>_<secret>`` and the Bearer header."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire import ids
from clubwire.domain import key_format

PREFIX = "AbCdEf0123"
SECRET = "0123456789ABCDEFGHIJKLmnopqrstuv"
VALID = f"cw_live_{PREFIX}_{SECRET}"

base62_text = st.text(alphabet=ids.BASE62)
any_text = st.text(alphabet=st.characters(exclude_categories=()))


def fullwidth(ascii_text: str) -> str:
    """The same letters and digits in their fullwidth forms (U+FF01..U+FF5E)."""
    return "".join(chr(ord(c) + 0xFEE0) for c in ascii_text)


ARABIC_INDIC_DIGITS = "".join(chr(0x0660 + n) for n in range(10))


class FakeRandom:
    """A deterministic ``random_base62`` that hands out scripted strings and records lengths."""

    def __init__(self, *parts: str) -> None:
        self._parts: Iterator[str] = iter(parts)
        self.lengths: list[int] = []

    def __call__(self, length: int) -> str:
        self.lengths.append(length)
        part = next(self._parts)
        assert len(part) == length
        return part


def test_the_example_key_has_the_documented_lengths() -> None:
    assert len(PREFIX) == key_format.PREFIX_LENGTH
    assert len(SECRET) == key_format.SECRET_LENGTH


def test_parse_splits_a_valid_key_into_prefix_and_secret() -> None:
    assert key_format.parse(VALID) == key_format.ParsedKey(prefix=PREFIX, secret=SECRET)


@pytest.mark.parametrize(
    ("prefix", "secret"),
    [
        ("a" * 8, SECRET),
        ("a" * 12, SECRET),
        (PREFIX, "s" * 64),
    ],
    ids=["prefix-8", "prefix-12", "secret-64"],
)
def test_parse_accepts_the_boundary_lengths(prefix: str, secret: str) -> None:
    assert key_format.parse(f"cw_live_{prefix}_{secret}") == key_format.ParsedKey(prefix, secret)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param(f"cw_test_{PREFIX}_{SECRET}", id="wrong-tag"),
        pytest.param(f"CW_LIVE_{PREFIX}_{SECRET}", id="upper-case-tag"),
        pytest.param(f"cw-live-{PREFIX}-{SECRET}", id="hyphens"),
        pytest.param(f"{PREFIX}_{SECRET}", id="no-tag"),
        pytest.param(f"cw_live_{PREFIX}{SECRET}", id="no-separator"),
        pytest.param(f"cw_live_{'a' * 7}_{SECRET}", id="prefix-7"),
        pytest.param(f"cw_live_{'a' * 13}_{SECRET}", id="prefix-13"),
        pytest.param(f"cw_live_{PREFIX}_{'s' * 31}", id="secret-31"),
        pytest.param(f"cw_live_{PREFIX}_{'s' * 65}", id="secret-65"),
        pytest.param(f"cw_live__{PREFIX}_{SECRET}", id="double-underscore-after-tag"),
        pytest.param(f"cw_live_{PREFIX}__{SECRET}", id="double-underscore-before-secret"),
        pytest.param(f"cw_live_{PREFIX}_{SECRET}_", id="trailing-underscore"),
        pytest.param(f"cw_live_{PREFIX}_{SECRET[:16]}_{SECRET[16:]}", id="underscore-in-secret"),
        pytest.param(f"cw_live_{PREFIX[:5]}_{PREFIX[5:]}_{SECRET}", id="underscore-in-prefix"),
        pytest.param(f" {VALID}", id="leading-space"),
        pytest.param(f"{VALID} ", id="trailing-space"),
        pytest.param(f"\t{VALID}", id="leading-tab"),
        pytest.param(f"{VALID}\n", id="trailing-newline"),
        pytest.param(f"{VALID}\r\n", id="trailing-crlf"),
        pytest.param(f"\n{VALID}", id="leading-newline"),
        pytest.param(f"{VALID}\x00", id="trailing-nul"),
        pytest.param(f"Bearer {VALID}", id="whole-header"),
        pytest.param(f"cw_live_{PREFIX}_{SECRET[:-1]}-", id="hyphen-in-secret"),
        pytest.param(
            f"cw_live_{PREFIX}_{ARABIC_INDIC_DIGITS * 4}", id="arabic-indic-digits-secret"
        ),
        pytest.param(f"cw_live_{ARABIC_INDIC_DIGITS}_{SECRET}", id="arabic-indic-digits-prefix"),
        pytest.param(f"cw_live_{PREFIX}_{fullwidth('1234') * 8}", id="fullwidth-digits-secret"),
        pytest.param(f"cw_live_{fullwidth('ABCDEFGHIJ')}_{SECRET}", id="fullwidth-letters-prefix"),
        pytest.param(f"cw_live_{PREFIX}_{SECRET[:-1]}\u212a", id="kelvin-sign-secret"),
        pytest.param(f"cw_live_{PREFIX}_{SECRET[:-1]}é", id="accented-letter-secret"),
        pytest.param(f"cw_live_{PREFIX}_{SECRET[:-1]}\u0131", id="dotless-i-secret"),
        pytest.param(
            f"{fullwidth('cw')}_{fullwidth('live')}_{PREFIX}_{SECRET}", id="fullwidth-tag"
        ),
    ],
)
def test_parse_rejects_values_that_are_not_key_shaped(value: str) -> None:
    assert key_format.parse(value) is None


def test_parse_rejects_very_long_values_quickly() -> None:
    assert key_format.parse(VALID + "a" * 1_000_000) is None


@given(any_text)
def test_parse_never_raises_on_any_text(value: str) -> None:
    result = key_format.parse(value)
    assert result is None or isinstance(result, key_format.ParsedKey)


@given(st.text(min_size=key_format.MAX_KEY_LENGTH - 20, max_size=2_000))
def test_parse_never_raises_on_long_text(value: str) -> None:
    result = key_format.parse(value)
    assert result is None or isinstance(result, key_format.ParsedKey)


@given(any_text)
def test_whatever_parse_accepts_is_exactly_tag_prefix_and_secret(value: str) -> None:
    result = key_format.parse(value)
    if result is not None:
        assert value == f"{key_format.TAG}{result.prefix}_{result.secret}"
        assert result.prefix.isascii()
        assert result.secret.isascii()


@given(st.text(min_size=1), base62_text)
def test_parse_rejects_anything_in_front_of_a_valid_key(junk: str, tail: str) -> None:
    assert key_format.parse(junk + VALID + tail) is None


@given(
    st.text(
        alphabet=ids.BASE62, min_size=key_format.PREFIX_LENGTH, max_size=key_format.PREFIX_LENGTH
    ),
    st.text(
        alphabet=ids.BASE62, min_size=key_format.SECRET_LENGTH, max_size=key_format.SECRET_LENGTH
    ),
)
def test_generated_key_parses_back_to_its_parts(prefix: str, secret: str) -> None:
    new = key_format.generate(FakeRandom(prefix, secret))
    assert new.value == f"cw_live_{prefix}_{secret}"
    assert new.prefix == prefix
    assert key_format.parse(new.value) == key_format.ParsedKey(prefix=prefix, secret=secret)
    assert key_format.matches(secret, new.secret_hash)


def test_keys_generated_with_real_randomness_round_trip() -> None:
    for _ in range(200):
        new = key_format.generate(ids.random_base62)
        parsed = key_format.parse(new.value)
        assert parsed is not None
        assert parsed.prefix == new.prefix
        assert key_format.matches(parsed.secret, new.secret_hash)


def test_keys_generated_with_real_randomness_differ() -> None:
    values = {key_format.generate(ids.random_base62).value for _ in range(100)}
    assert len(values) == 100


def test_generate_draws_a_prefix_then_a_secret_of_the_documented_lengths() -> None:
    fake = FakeRandom(PREFIX, SECRET)
    key_format.generate(fake)
    assert fake.lengths == [key_format.PREFIX_LENGTH, key_format.SECRET_LENGTH]


def test_generate_uses_only_the_injected_randomness() -> None:
    first = key_format.generate(FakeRandom(PREFIX, SECRET))
    second = key_format.generate(FakeRandom(PREFIX, SECRET))
    assert first == second
    assert first.value == VALID


@given(
    st.data(),
    st.text(
        alphabet=ids.BASE62, min_size=key_format.SECRET_LENGTH, max_size=key_format.SECRET_LENGTH
    ),
)
def test_a_secret_with_one_character_changed_does_not_match(
    data: st.DataObject, secret: str
) -> None:
    new = key_format.generate(FakeRandom(PREFIX, secret))
    index = data.draw(st.integers(min_value=0, max_value=len(secret) - 1))
    other = data.draw(st.sampled_from(ids.BASE62).filter(lambda c: c != secret[index]))
    tampered = secret[:index] + other + secret[index + 1 :]
    assert not key_format.matches(tampered, new.secret_hash)
    assert key_format.parse(f"cw_live_{PREFIX}_{tampered}") is not None


def test_the_secret_does_not_match_another_keys_hash() -> None:
    other = key_format.generate(FakeRandom("Z" * 10, "z" * 32))
    assert not key_format.matches(SECRET, other.secret_hash)


def test_the_stored_hash_is_64_hex_characters_and_not_the_secret() -> None:
    new = key_format.generate(FakeRandom(PREFIX, SECRET))
    assert re.fullmatch(r"[0-9a-f]{64}", new.secret_hash)
    assert SECRET not in new.secret_hash
    assert SECRET not in new.secret_hash.upper()


def test_the_stored_hash_covers_only_the_secret_not_the_prefix() -> None:
    one = key_format.generate(FakeRandom("a" * 10, SECRET))
    two = key_format.generate(FakeRandom("b" * 10, SECRET))
    assert one.secret_hash == two.secret_hash == key_format.hash_secret(SECRET)


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer abc", "abc"),
        ("bearer abc", "abc"),
        ("BEARER abc", "abc"),
        ("bEaReR abc", "abc"),
        (f"Bearer {VALID}", VALID),
        ("  Bearer   abc  ", "abc"),
        ("Bearer abc\n", "abc"),
    ],
)
def test_bearer_token_reads_the_token_whatever_the_scheme_case(header: str, token: str) -> None:
    assert key_format.bearer_token(header) == token


@pytest.mark.parametrize(
    "header",
    [
        pytest.param(None, id="missing"),
        pytest.param("", id="empty"),
        pytest.param("   ", id="blank"),
        pytest.param("Bearer", id="scheme-alone"),
        pytest.param("Bearer ", id="scheme-and-space"),
        pytest.param("Bearer    ", id="scheme-and-spaces"),
        pytest.param("Basic dXNlcjpwYXNz", id="basic"),
        pytest.param("Token abc", id="token-scheme"),
        pytest.param("Bearerabc", id="no-space"),
        pytest.param("Bearer: abc", id="colon"),
        pytest.param("Bear abc", id="truncated-scheme"),
        pytest.param(VALID, id="bare-key"),
    ],
)
def test_bearer_token_is_none_without_a_bearer_token(header: str | None) -> None:
    assert key_format.bearer_token(header) is None


@given(any_text)
def test_bearer_token_never_raises_and_returns_a_trimmed_token(header: str) -> None:
    token = key_format.bearer_token(header)
    if token is not None:
        assert token
        assert token == token.strip()
        assert token in header


@given(
    st.sampled_from(["Bearer", "bearer", "BEARER", "bEARER", "BeArEr"]),
    st.text(alphabet=ids.BASE62 + "-._~+/=", min_size=1),
)
def test_bearer_token_returns_any_token_after_the_scheme(scheme: str, token: str) -> None:
    assert key_format.bearer_token(f"{scheme} {token}") == token
