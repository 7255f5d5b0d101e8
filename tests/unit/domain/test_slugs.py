"""Unit tests for club slugs, which are also host name labels."""

from __future__ import annotations

import pytest

from clubwire.domain import slugs


@pytest.mark.parametrize("slug", ["granite", "a", "0", "st-johns-2", "a-b", "a--b", "a" * 63])
def test_is_slug_accepts_host_name_labels(slug: str) -> None:
    assert slugs.is_slug(slug)


@pytest.mark.parametrize(
    "slug",
    [
        pytest.param("", id="empty"),
        pytest.param("-", id="hyphen-alone"),
        pytest.param("-a", id="leading-hyphen"),
        pytest.param("a-", id="trailing-hyphen"),
        pytest.param("A", id="upper-case"),
        pytest.param("Granite", id="capitalised"),
        pytest.param("a_b", id="underscore"),
        pytest.param("a" * 64, id="64-chars"),
        pytest.param("é", id="accented"),
        pytest.param("a.b", id="dot"),
        pytest.param("a b", id="space"),
        pytest.param("a\n", id="trailing-newline"),
        pytest.param(" a", id="leading-space"),
        pytest.param("a/b", id="slash"),
        pytest.param("\u0661", id="arabic-indic-digit"),
        pytest.param("\uff41", id="fullwidth-letter"),
    ],
)
def test_is_slug_rejects_anything_else(slug: str) -> None:
    assert not slugs.is_slug(slug)
