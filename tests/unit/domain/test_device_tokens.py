"""Device tokens: only the key that issued one reads it, within its lifetime, unaltered."""

from __future__ import annotations

from datetime import timedelta

import pytest

from clubwire.domain import device_tokens
from clubwire.domain.device_tokens import Device
from tests.factories import EPOCH

KEY = "the secret key"


def test_a_token_names_the_user_and_when_it_was_issued() -> None:
    token = device_tokens.issue(KEY, "usr_01", EPOCH)
    assert device_tokens.read(KEY, token, EPOCH + timedelta(days=89)) == Device(
        "usr_01", int(EPOCH.timestamp())
    )
    assert KEY not in token


@pytest.mark.parametrize(
    "altered",
    [
        lambda token: token.replace("usr_01", "usr_02"),
        lambda token: token[:-1] + ("A" if token[-1] != "A" else "B"),
        lambda token: token.rpartition(".")[0],
        lambda token: "usr_01.1700000000." + token.rpartition(".")[2],
        lambda token: token + "\x00",
        lambda token: token.replace("usr", "ｕsr"),
        lambda token: token * 10,
        lambda _token: "",
        lambda _token: "...",
        lambda _token: "usr_01.１７.abc",
    ],
)
def test_an_altered_token_is_no_token(altered: object) -> None:
    token = device_tokens.issue(KEY, "usr_01", EPOCH)
    assert callable(altered)
    assert device_tokens.read(KEY, altered(token), EPOCH) is None


def test_another_key_or_another_time_reads_nothing() -> None:
    token = device_tokens.issue(KEY, "usr_01", EPOCH)
    assert device_tokens.read("another key", token, EPOCH) is None
    assert device_tokens.read(KEY, token, EPOCH + timedelta(days=91)) is None
    assert device_tokens.read(KEY, token, EPOCH - timedelta(seconds=1)) is None  # from the future
    assert device_tokens.read(KEY, None, EPOCH) is None
