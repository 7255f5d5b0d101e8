"""Unit tests for the API key format ``cw_live_<prefix>_<secret>``, its checksum, and the
Bearer header."""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterator
from datetime import datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire import ids
from clubwire.domain import base62, key_format
from tests.factories import EPOCH

PREFIX = "AbCdEf0123"
RANDOM = "0123456789ABCDEFGHIJKLmnopqrstuv"
CHECKSUM = key_format.checksum(f"cw_live_{PREFIX}_{RANDOM}")
SECRET = RANDOM + CHECKSUM
VALID = f"cw_live_{PREFIX}_{SECRET}"
LEGACY = f"cw_live_{PREFIX}_{RANDOM}"  # made before checksums: a 32-character secret

base62_text = st.text(alphabet=base62.ALPHABET)
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
    assert len(SECRET) == key_format.SECRET_LENGTH == 38
    assert len(RANDOM) == key_format.LEGACY_SECRET_LENGTH == 32


@pytest.mark.parametrize("value", [VALID, LEGACY], ids=["checksummed", "legacy"])
def test_parse_splits_a_key_old_or_new_into_prefix_and_secret(value: str) -> None:
    prefix, secret = value.removeprefix("cw_live_").split("_")
    assert key_format.parse(value) == key_format.ParsedKey(prefix=prefix, secret=secret)


@pytest.mark.parametrize("value", [VALID, LEGACY], ids=["checksummed", "legacy"])
def test_the_published_pattern_finds_keys_old_and_new_in_text(value: str) -> None:
    text = f'API_KEY="{value}" # and cw_live_short_x, {VALID}x, _{VALID}'
    assert re.findall(key_format.PATTERN, text) == [value]


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("", id="empty"),
        pytest.param(f"cw_test_{PREFIX}_{SECRET}", id="wrong-tag"),
        pytest.param(f"CW_LIVE_{PREFIX}_{SECRET}", id="upper-case-tag"),
        pytest.param(f"cw-live-{PREFIX}-{SECRET}", id="hyphens"),
        pytest.param(f"{PREFIX}_{SECRET}", id="no-tag"),
        pytest.param(f"cw_live_{PREFIX}{SECRET}", id="no-separator"),
        pytest.param(f"cw_live_{'a' * 9}_{SECRET}", id="prefix-9"),
        pytest.param(f"cw_live_{'a' * 11}_{SECRET}", id="prefix-11"),
        pytest.param(f"cw_live_{PREFIX}_{'s' * 31}", id="secret-31"),
        pytest.param(f"cw_live_{PREFIX}_{'s' * 33}", id="secret-33"),
        pytest.param(f"cw_live_{PREFIX}_{'s' * 37}", id="secret-37"),
        pytest.param(f"cw_live_{PREFIX}_{'s' * 39}", id="secret-39"),
        pytest.param(f"cw_live_{PREFIX}_{'s' * 64}", id="secret-64"),
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
        pytest.param(f"cw_live_{PREFIX}_{SECRET[:-1]}", id="checksum-cut-short"),
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


prefixes = st.text(
    alphabet=base62.ALPHABET, min_size=key_format.PREFIX_LENGTH, max_size=key_format.PREFIX_LENGTH
)
randoms = st.text(
    alphabet=base62.ALPHABET, min_size=key_format.RANDOM_LENGTH, max_size=key_format.RANDOM_LENGTH
)


@given(prefixes, randoms)
def test_generated_key_parses_back_to_its_parts_and_its_checksum_holds(
    prefix: str, random: str
) -> None:
    new = key_format.generate(FakeRandom(prefix, random))
    secret = random + key_format.checksum(f"cw_live_{prefix}_{random}")
    assert new.value == f"cw_live_{prefix}_{secret}"
    assert new.prefix == prefix
    parsed = key_format.parse(new.value)
    assert parsed == key_format.ParsedKey(prefix=prefix, secret=secret)
    assert key_format.checksum_holds(parsed)
    assert key_format.matches(secret, new.secret_hash)


def test_keys_generated_with_real_randomness_round_trip() -> None:
    for _ in range(200):
        new = key_format.generate(ids.random_base62)
        parsed = key_format.parse(new.value)
        assert parsed is not None
        assert parsed.prefix == new.prefix
        assert key_format.checksum_holds(parsed)
        assert key_format.matches(parsed.secret, new.secret_hash)


def test_keys_generated_with_real_randomness_differ() -> None:
    values = {key_format.generate(ids.random_base62).value for _ in range(100)}
    assert len(values) == 100


def test_generate_draws_a_prefix_then_the_random_part_of_the_secret() -> None:
    fake = FakeRandom(PREFIX, RANDOM)
    key_format.generate(fake)
    assert fake.lengths == [key_format.PREFIX_LENGTH, key_format.RANDOM_LENGTH]


def test_generate_uses_only_the_injected_randomness() -> None:
    first = key_format.generate(FakeRandom(PREFIX, RANDOM))
    second = key_format.generate(FakeRandom(PREFIX, RANDOM))
    assert first == second
    assert first.value == VALID


@pytest.mark.parametrize(
    ("text", "crc"),
    [("", 0), ("a", 0xE8B7BE43), ("cw_live_", zlib.crc32(b"cw_live_")), ("z" * 100, None)],
)
def test_the_checksum_is_the_crc32_in_six_base62_digits_most_significant_first(
    text: str, crc: int | None
) -> None:
    crc = zlib.crc32(text.encode()) if crc is None else crc
    digits = key_format.checksum(text)
    assert len(digits) == key_format.CHECKSUM_LENGTH
    assert sum(base62.ALPHABET.index(d) * 62**i for i, d in enumerate(reversed(digits))) == crc


def test_the_largest_crc32_still_fits_six_digits() -> None:
    assert 62**key_format.CHECKSUM_LENGTH > 2**32 - 1 >= 62 ** (key_format.CHECKSUM_LENGTH - 1)


def test_a_zero_checksum_is_zero_padded() -> None:
    assert key_format.checksum("") == "000000"


@pytest.mark.parametrize("value", [VALID, LEGACY], ids=["checksummed", "legacy-has-none"])
def test_the_checksum_of_a_real_key_holds(value: str) -> None:
    parsed = key_format.parse(value)
    assert parsed is not None
    assert key_format.checksum_holds(parsed)


@given(st.data(), prefixes, randoms)
def test_any_one_character_changed_anywhere_fails_the_checksum(
    data: st.DataObject, prefix: str, random: str
) -> None:
    """Prefix, random part or checksum: one typo is always caught (CRC32 catches every
    error in one byte), and so is a swap of two neighbours."""
    value = key_format.generate(FakeRandom(prefix, random)).value
    start = len(key_format.TAG)
    index = data.draw(
        st.integers(min_value=start, max_value=len(value) - 1).filter(lambda i: value[i] != "_")
    )
    other = data.draw(st.sampled_from(base62.ALPHABET).filter(lambda c: c != value[index]))
    tampered = key_format.parse(value[:index] + other + value[index + 1 :])
    assert tampered is not None
    assert not key_format.checksum_holds(tampered)


@given(prefixes, randoms)
def test_two_neighbours_swapped_fail_the_checksum(prefix: str, random: str) -> None:
    value = key_format.generate(FakeRandom(prefix, random)).value
    secret_at = value.rindex("_") + 1
    for index in range(secret_at, len(value) - 1):
        if value[index] != value[index + 1]:
            swapped = value[:index] + value[index + 1] + value[index] + value[index + 2 :]
            parsed = key_format.parse(swapped)
            assert parsed is not None
            assert not key_format.checksum_holds(parsed)


@given(prefixes, randoms)
def test_a_random_secret_of_the_new_length_almost_never_passes(prefix: str, random: str) -> None:
    """1 in 2**32 would; hypothesis's few hundred draws never should."""
    guessed = key_format.parse(f"cw_live_{prefix}_{random}{random[:6]}")
    assert guessed is not None
    assert not key_format.checksum_holds(guessed)


@given(
    st.data(),
    st.text(
        alphabet=base62.ALPHABET,
        min_size=key_format.RANDOM_LENGTH,
        max_size=key_format.RANDOM_LENGTH,
    ),
)
def test_a_secret_with_one_character_changed_does_not_match(
    data: st.DataObject, random: str
) -> None:
    new = key_format.generate(FakeRandom(PREFIX, random))
    secret = new.value.rsplit("_", 1)[1]
    index = data.draw(st.integers(min_value=0, max_value=len(secret) - 1))
    other = data.draw(st.sampled_from(base62.ALPHABET).filter(lambda c: c != secret[index]))
    tampered = secret[:index] + other + secret[index + 1 :]
    assert not key_format.matches(tampered, new.secret_hash)
    assert key_format.parse(f"cw_live_{PREFIX}_{tampered}") is not None


def test_the_secret_does_not_match_another_keys_hash() -> None:
    other = key_format.generate(FakeRandom("Z" * 10, "z" * 32))
    assert not key_format.matches(SECRET, other.secret_hash)


def test_the_stored_hash_is_64_hex_characters_and_not_the_secret() -> None:
    new = key_format.generate(FakeRandom(PREFIX, RANDOM))
    assert re.fullmatch(r"[0-9a-f]{64}", new.secret_hash)
    assert SECRET not in new.secret_hash
    assert SECRET not in new.secret_hash.upper()


def test_the_stored_hash_is_of_the_whole_secret_part_checksum_included() -> None:
    assert key_format.generate(FakeRandom(PREFIX, RANDOM)).secret_hash == (
        key_format.hash_secret(SECRET)
    )


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
    st.text(alphabet=base62.ALPHABET + "-._~+/=", min_size=1),
)
def test_bearer_token_returns_any_token_after_the_scheme(scheme: str, token: str) -> None:
    assert key_format.bearer_token(f"{scheme} {token}") == token


@pytest.mark.parametrize(
    ("expires_at", "expired"),
    [
        (None, False),
        (EPOCH + timedelta(microseconds=1), False),
        (EPOCH, True),
        (EPOCH - timedelta(days=1), True),
    ],
    ids=["never", "a-moment-later", "the-moment-itself", "yesterday"],
)
def test_a_key_has_expired_from_its_expiry_time_on(
    expires_at: datetime | None, expired: bool
) -> None:
    assert key_format.expired(expires_at, EPOCH) is expired
