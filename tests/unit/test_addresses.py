"""Unit tests for which addresses and webhook URLs are safe to send to (DESIGN §7)."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import addresses
from clubwire.domain.addresses import NonPublicAddress, UnsafeUrl, check_url, literal_address

NON_GLOBAL_V4 = [
    "0.0.0.0",  # "this network" 0/8, both ends
    "0.255.255.255",
    "10.0.0.0",  # private 10/8
    "10.255.255.255",
    "100.64.0.0",  # carrier-grade NAT 100.64/10
    "100.127.255.255",
    "127.0.0.1",  # loopback 127/8
    "127.255.255.255",
    "169.254.0.1",  # link-local 169.254/16
    "169.254.169.254",  # cloud metadata
    "172.16.0.0",  # private 172.16/12
    "172.31.255.255",
    "192.0.0.0",  # IETF protocol assignments 192.0.0/24
    "192.0.0.9",
    "192.0.0.255",
    "192.0.2.1",  # documentation TEST-NET-1
    "192.88.99.1",  # deprecated 6to4 relay anycast
    "192.168.0.0",  # private 192.168/16
    "192.168.255.255",
    "198.18.0.0",  # benchmarking 198.18/15
    "198.19.255.255",
    "198.51.100.1",  # documentation TEST-NET-2
    "203.0.113.1",  # documentation TEST-NET-3
    "224.0.0.1",  # multicast 224/4
    "233.252.0.1",  # multicast documentation
    "239.255.255.255",
    "240.0.0.1",  # reserved 240/4
    "255.255.255.254",
    "255.255.255.255",  # broadcast
]

GLOBAL_V4 = [
    "8.8.8.8",
    "1.1.1.1",
    "1.0.0.0",
    "9.255.255.255",  # just outside 10/8
    "11.0.0.0",
    "100.63.255.255",  # just outside 100.64/10
    "100.128.0.0",
    "126.255.255.255",  # just outside 127/8
    "128.0.0.0",
    "169.253.255.255",  # just outside 169.254/16
    "169.255.0.0",
    "172.15.255.255",  # just outside 172.16/12
    "172.32.0.0",
    "192.0.1.1",
    "192.167.255.255",  # just outside 192.168/16
    "192.169.0.0",
    "198.17.255.255",  # just outside 198.18/15
    "198.20.0.0",
    "223.255.255.255",  # just below multicast
]

TEREDO_CLIENT_LOOPBACK = "2001:0:4136:e378:8000:63bf:80ff:fffe"  # client 127.0.0.1, XORed
TEREDO_SERVER_PRIVATE = "2001:0:a00:1:8000:63bf:f7f7:f7f7"  # server 10.0.0.1, client 8.8.8.8
TEREDO_ALL_GLOBAL = "2001:0:808:808:8000:63bf:f7f7:f7f7"  # server and client 8.8.8.8

NON_GLOBAL_V6 = [
    "::",  # unspecified
    "::1",  # loopback
    "::ffff:127.0.0.1",  # IPv4-mapped
    "::ffff:10.0.0.1",
    "::ffff:169.254.169.254",
    "::127.0.0.1",  # IPv4-compatible (deprecated)
    "::8.8.8.8",  # deprecated, not routed, whatever it carries
    "64:ff9b::7f00:1",  # NAT64 well-known prefix carrying 127.0.0.1
    "64:ff9b::a00:1",  # … carrying 10.0.0.1
    "64:ff9b::a9fe:a9fe",  # … carrying 169.254.169.254
    "64:ff9b:1::a00:1",  # NAT64 local-use prefix
    "64:ff9b:1::808:808",
    "100::",  # discard 100::/64
    "100::ffff:ffff:ffff:ffff",
    "2001::1",  # IETF protocol assignments 2001::/23
    "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
    TEREDO_CLIENT_LOOPBACK,
    TEREDO_SERVER_PRIVATE,
    TEREDO_ALL_GLOBAL,
    "2001:10::1",  # ORCHID
    "2001:db8::1",  # documentation 2001:db8::/32
    "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
    "2002:7f00:1::",  # 6to4 carrying 127.0.0.1
    "2002:a00:1::1",  # … carrying 10.0.0.1
    "2002:a9fe:a9fe::",  # … carrying 169.254.169.254
    "2002:c0a8:101::",  # … carrying 192.168.1.1
    "3fff::1",  # documentation 3fff::/20
    "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
    "fc00::1",  # unique-local fc00::/7
    "fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "fe80::1",  # link-local fe80::/10
    "febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
    "fec0::1",  # site-local fec0::/10 (deprecated)
    "feff::1",
    "ff02::1",  # multicast
    "ff0e::1",
    "1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",  # below 2000::/3
    "4000::1",  # above 2000::/3
    "5f00::1",  # SRv6 SIDs
    "e000::1",
]

GLOBAL_V6 = [
    "2606:4700:4700::1111",
    "2001:4860:4860::8888",
    "2000::1",  # first of 2000::/3
    "2001:200::1",  # just outside 2001::/23
    "2001:db9::1",  # just outside 2001:db8::/32
    "3fff:1000::1",  # just outside 3fff::/20
    "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",  # last of 2000::/3
    "::ffff:8.8.8.8",  # IPv4-mapped public address
    "2002:808:808::1",  # 6to4 carrying 8.8.8.8
    "64:ff9b::808:808",  # NAT64 carrying 8.8.8.8
]


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
        ("https://[zz]/", "URL is not valid ('zz' does not appear to be an IPv4 or IPv6 address)"),
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
    parts = check_url(url, allow_private=False)
    assert parts.scheme == "https"
    assert parts.hostname


@pytest.mark.parametrize(
    "url", ["https://127.0.0.1:8443/", "https://[::1]/", "https://localhost/", "https://10.0.0.5/"]
)
def test_private_literals_pass_when_allowed(url: str) -> None:
    assert check_url(url, allow_private=True).geturl() == url


def test_legacy_spellings_are_refused_even_when_private_targets_are_allowed() -> None:
    with pytest.raises(UnsafeUrl, match=r"^URL host 0x7f\.1 must be written as 127\.0\.0\.1$"):
        check_url("https://0x7f.1/", allow_private=True)


def test_check_url_does_not_resolve_names() -> None:
    assert check_url("https://localhost/", allow_private=False).hostname == "localhost"


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
        parts = check_url(url, allow_private)
    except UnsafeUrl:
        return
    assert parts.scheme == "https"
    assert parts.hostname


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
