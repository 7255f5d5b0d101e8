"""Unit tests for which addresses and webhook URLs are safe to send to (DESIGN §7)."""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv6Address, ip_address

import pytest
from hypothesis import given
from hypothesis import strategies as st
from yarl import URL

from clubwire.domain import addresses
from clubwire.domain.addresses import NonPublicAddress, UnsafeUrl, check_url, literal_address
from tests.ranges import (
    GLOBAL_V4,
    GLOBAL_V6,
    NON_GLOBAL_V4,
    NON_GLOBAL_V6,
    TEREDO_CLIENT_LOOPBACK,
    TEREDO_SERVER_PRIVATE,
)
from tests.spellings import spelled


@pytest.mark.parametrize("text", NON_GLOBAL_V4 + NON_GLOBAL_V6)
def test_non_global_addresses_are_refused(text: str) -> None:
    assert not addresses.is_global(ip_address(text))


@pytest.mark.parametrize("text", GLOBAL_V4 + GLOBAL_V6)
def test_global_unicast_addresses_pass(text: str) -> None:
    assert addresses.is_global(ip_address(text))


@pytest.mark.parametrize(
    "text",
    [
        "224.0.0.1",  # multicast
        "239.255.255.255",
        "192.0.0.9",
        "192.88.99.1",
        "::127.0.0.1",
        "64:ff9b::7f00:1",
        "64:ff9b::a00:1",
        "fec0::1",
        "ff0e::1",
    ],
)
def test_where_ipaddress_alone_would_let_an_address_through(text: str) -> None:
    """Python's ``is_global`` calls these global (3.11; most still on 3.13); we do not."""
    assert ip_address(text).is_global
    assert not addresses.is_global(ip_address(text))


@pytest.mark.parametrize(
    ("text", "embedded"),
    [
        ("::ffff:127.0.0.1", ["127.0.0.1"]),
        ("::10.0.0.1", ["10.0.0.1"]),
        ("2002:7f00:1::", ["127.0.0.1"]),
        ("2002:808:808:1234::1", ["8.8.8.8"]),
        ("64:ff9b::7f00:1", ["127.0.0.1"]),
        ("64:ff9b:1::a00:1", ["10.0.0.1"]),
        (TEREDO_CLIENT_LOOPBACK, ["65.54.227.120", "127.0.0.1"]),
        (TEREDO_SERVER_PRIVATE, ["10.0.0.1", "8.8.8.8"]),
        ("2606:4700:4700::1111", []),
        ("::1", ["0.0.0.1"]),
    ],
)
def test_embedded_ipv4_addresses_are_unpacked(text: str, embedded: list[str]) -> None:
    address = ip_address(text)
    assert isinstance(address, IPv6Address)
    assert [str(inner) for inner in addresses.embedded_ipv4(address)] == embedded


def test_the_teredo_client_matches_pythons_own_reading() -> None:
    address = IPv6Address(TEREDO_CLIENT_LOOPBACK)
    assert address.teredo == addresses.embedded_ipv4(address)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_an_embedded_address_is_judged_like_the_address_itself(number: int) -> None:
    v4 = IPv4Address(number)
    mapped = IPv6Address(0xFFFF_0000_0000 | number)
    assert addresses.is_global(mapped) == addresses.is_global(v4)
    if not addresses.is_global(v4):
        six_to_four = IPv6Address((0x2002 << 112) | (number << 80))
        nat64 = IPv6Address((0x64FF9B << 96) | number)
        assert not addresses.is_global(six_to_four)
        assert not addresses.is_global(nat64)


# -- literal hosts -----------------------------------------------------------------------

LOOPBACK_SPELLINGS = [
    "127.0.0.1",
    "2130706433",
    "0177.0.0.1",
    "017700000001",
    "0x7f.0.0.1",
    "0x7f000001",
    "0X7F.0x0.0.01",
    "127.1",
    "127.0.1",
    "0x7f.1",
    "127.0.0.1.",
    "2130706433.",
]
TEN_SPELLINGS = ["10.0.0.1", "167772161", "012.0.0.1", "0xa.0.0.1", "0xa000001", "10.1", "10.0.1"]
METADATA_SPELLINGS = ["169.254.169.254", "2852039166", "0xa9fea9fe", "0251.0376.0251.0376"]


@pytest.mark.parametrize(
    ("host", "expected"),
    [(host, "127.0.0.1") for host in LOOPBACK_SPELLINGS]
    + [(host, "10.0.0.1") for host in TEN_SPELLINGS]
    + [(host, "169.254.169.254") for host in METADATA_SPELLINGS]
    + [
        ("169.254.43518", "169.254.169.254"),
        ("[::1]", "::1"),
        ("::1", "::1"),
        ("[0:0:0:0:0:0:0:1]", "::1"),
        ("[::ffff:127.0.0.1]", "::ffff:7f00:1"),
        ("fe80::1%25eth0", "fe80::1"),
        ("[2606:4700:4700::1111]", "2606:4700:4700::1111"),
    ],
)
def test_literal_hosts_are_read_in_every_spelling(host: str, expected: str) -> None:
    assert literal_address(host) == ip_address(expected)


@pytest.mark.parametrize(
    "host",
    [
        "1.2.3.example.com",
        "127.0.0.1.example",
        "example.com",
        "localhost",
        "0x7g.1",
        "1.2.3.4.5",
        "08.1",  # not octal
        "4294967296",  # past 32 bits
        "0x",
        "",
        ".",
        "[]",
        "127.0.0.1 x",
        "１２７.0.0.1",  # fullwidth digits
        "[not-ipv6]",
    ],
)
def test_names_that_merely_contain_digits_are_not_literals(host: str) -> None:
    assert literal_address(host) is None


@given(st.text())
def test_literal_address_never_raises(host: str) -> None:
    found = literal_address(host)
    assert found is None or isinstance(found, IPv4Address | IPv6Address)


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_decimal_and_hex_spelling_is_the_address(number: int) -> None:
    assert literal_address(str(number)) == IPv4Address(number)
    assert literal_address(hex(number)) == IPv4Address(number)


# -- URLs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://hook.example/", "URL must use https://"),
        ("ftp://hook.example/", "URL must use https://"),
        ("hook.example/path", "URL must use https://"),
        ("https://user@hook.example/", "URL must not contain a user name or password"),
        ("https://user:pw@hook.example/", "URL must not contain a user name or password"),
        ("https://" + "a" * 2040 + ".example/", "URL is longer than 2048 characters"),
        ("https:///path", "URL has no host"),
        ("https://:443/", "URL has no host"),
        ("https://hook.example/#top", "URL must not contain a fragment (#…)"),
        ("https://hook.example/#", "URL must not contain a fragment (#…)"),
        ("https://hook.example:0/", "URL port must be a number from 1 to 65535"),
        ("https://hook.example:65536/", "URL port must be a number from 1 to 65535"),
        ("https://hook.example:http/", "URL port must be a number from 1 to 65535"),
        ("https://hook.example/a b", "URL must not contain spaces or control characters"),
        (" https://hook.example/", "URL must not contain spaces or control characters"),
        ("https://hook.example/\n", "URL must not contain spaces or control characters"),
        ("https://hook.example/\x00", "URL must not contain spaces or control characters"),
        ("https://hook.example/\u200b", "URL must not contain spaces or control characters"),
        ("https://hook.example/\u00a0", "URL must not contain spaces or control characters"),
        ("https://hook..example/", "URL host 'hook..example' is not a valid host name"),
        ("https://ho%6fk.example/", "URL host 'ho%6fk.example' is not a valid host name"),
        ("https://[zz]/", "URL is not valid (The IPv6 content between brackets is not valid)"),
        ("https://127.0.0.1/", "127.0.0.1 is not a public address"),
        ("https://2130706433/", "127.0.0.1 is not a public address"),
        ("https://0x7f.1:8443/", "127.0.0.1 is not a public address"),
        ("https://017700000001/", "127.0.0.1 is not a public address"),
        ("https://127.0.0.1./", "127.0.0.1 is not a public address"),
        ("https://2852039166/latest", "169.254.169.254 is not a public address"),
        ("https://10.1/", "10.0.0.1 is not a public address"),
        ("https://[::1]/", "::1 is not a public address"),
        ("https://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1 is not a public address"),
        ("https://[64:ff9b::a00:5]/", "64:ff9b::a00:5 is not a public address"),
        ("https://[fe80::1%25eth0]/", "fe80::1 is not a public address"),
        ("https://134744072/", "URL host 134744072 must be written as 8.8.8.8"),
    ],
)
def test_check_url_says_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(UnsafeUrl) as caught:
        check_url(url, allow_private=False)
    assert str(caught.value) == message


def test_non_public_literals_raise_the_specific_kind() -> None:
    with pytest.raises(NonPublicAddress):
        check_url("https://10.0.0.5/", allow_private=False)


@pytest.mark.parametrize(
    "url",
    [
        "https://hook.example/webhooks?club=1",
        "HTTPS://Hook.Example:8443/path",
        "https://hook.example./",
        "https://bücher.example/",
        "https://8.8.8.8/",
        "https://[2606:4700:4700::1111]:443/",
        "https://under_score.example/",
        "https://hook.example/" + "a" * (2048 - len("https://hook.example/")),
    ],
)
def test_safe_urls_pass(url: str) -> None:
    read = check_url(url, allow_private=False)
    assert read.scheme == "https"
    assert read.raw_host


@pytest.mark.parametrize(
    "url", ["https://127.0.0.1:8443/", "https://[::1]/", "https://localhost/", "https://10.0.0.5/"]
)
def test_private_literals_pass_when_allowed(url: str) -> None:
    assert str(check_url(url, allow_private=True)) == url


def test_legacy_spellings_are_refused_even_when_private_targets_are_allowed() -> None:
    with pytest.raises(UnsafeUrl, match=r"^URL host 0x7f\.1 must be written as 127\.0\.0\.1$"):
        check_url("https://0x7f.1/", allow_private=True)


def test_check_url_does_not_resolve_names() -> None:
    assert check_url("https://localhost/", allow_private=False).raw_host == "localhost"


url_text = st.text(alphabet=st.characters(codec="utf-8"), max_size=80)
url_like = st.builds(
    "{}://{}{}".format,
    st.sampled_from(["https", "http", "HTTPS", ""]),
    st.text(alphabet="0123456789abcdefx.:[]%@-_", max_size=30),
    st.text(alphabet="/?#:@[]% \t", max_size=10),
)


@given(st.one_of(url_text, url_like), st.booleans())
def test_check_url_raises_nothing_but_unsafe_url(url: str, allow_private: bool) -> None:
    try:
        read = check_url(url, allow_private)
    except UnsafeUrl:
        return
    assert read.scheme == "https"
    assert read.raw_host


# -- hosts as the HTTP client reads them ---------------------------------------------------

NON_GLOBAL_SPELLED = spelled(NON_GLOBAL_V4 + NON_GLOBAL_V6)
GLOBAL_SPELLED = spelled(GLOBAL_V4 + GLOBAL_V6)


@pytest.mark.parametrize(("address", "host"), NON_GLOBAL_SPELLED + GLOBAL_SPELLED)
def test_each_spelling_is_the_address_to_the_http_client(address: str, host: str) -> None:
    """The premise of the tests below: yarl (so aiohttp) connects to ``address`` itself."""
    assert ip_address(URL(f"https://{host}/").raw_host or "") == ip_address(address)


@pytest.mark.parametrize(("address", "host"), NON_GLOBAL_SPELLED)
def test_a_spelled_non_public_address_is_judged_as_that_address(address: str, host: str) -> None:
    with pytest.raises(NonPublicAddress) as caught:
        check_url(f"https://{host}/hook", allow_private=False)
    assert str(caught.value) == f"{addresses.display(ip_address(address))} is not a public address"


@pytest.mark.parametrize(("address", "host"), NON_GLOBAL_SPELLED[::7] + GLOBAL_SPELLED)
def test_a_spelled_address_must_be_written_plainly_even_when_allowed(
    address: str, host: str
) -> None:
    """Public or allowed, the URL that is kept must say which address it reaches."""
    shown = addresses.display(ip_address(address))
    with pytest.raises(UnsafeUrl, match=f"must be written as {re.escape(shown)}$"):
        check_url(f"https://{host}/hook", allow_private=True)


@pytest.mark.parametrize(
    ("host", "read"),
    [
        ("ⓛⓞⓒⓐⓛⓗⓞⓢⓣ", "localhost"),  # circled
        ("ＬＯＣＡＬＨＯＳＴ", "localhost"),  # full-width capitals
        ("Hook。Example．com", "hook.example.com"),  # ideographic, full-width dots
        ("bücher.example", "xn--bcher-kva.example"),
        ("ⓔxample.com", "example.com"),
    ],
)
def test_names_are_checked_as_the_client_will_look_them_up(host: str, read: str) -> None:
    assert check_url(f"https://{host}/", allow_private=False).raw_host == read


# -- resolution --------------------------------------------------------------------------


def test_a_name_resolving_only_to_private_addresses_is_refused() -> None:
    found = ["10.0.0.5", "10.0.0.5", "fd00::1", "fe80::1%eth0"]
    with pytest.raises(NonPublicAddress) as caught:
        addresses.check_resolved("hook.example", found)
    assert str(caught.value) == (
        "hook.example resolves only to non-public addresses (10.0.0.5, fd00::1, fe80::1%eth0)"
    )


@pytest.mark.parametrize("found", [["10.0.0.5", "8.8.8.8"], []])
def test_mixed_or_unresolved_answers_pass(found: list[str]) -> None:
    addresses.check_resolved("hook.example", found)  # the attempt keeps only 8.8.8.8
