"""Which webhook URLs and addresses are safe to send to (DESIGN §7), as pure functions.

A receiver must be reached over ``https://`` at a globally routable unicast address. An
address is judged after unpacking the forms that carry an IPv4 address inside an IPv6 one
(IPv4-mapped, IPv4-compatible, 6to4, NAT64, Teredo): the embedded address must be global
too. ``ipaddress``'s own ``is_global`` is the base, but on its own it lets through, among
others, multicast, ``192.0.0.8``, ``fec0::/10``, ``::127.0.0.1``, ``64:ff9b::7f00:1`` and
``2002:7f00:1::`` (Python 3.11), so the rules below add to it.

URL hosts are read the way the system resolver would read them: ``2130706433``,
``0x7f.1`` and ``017700000001`` all mean ``127.0.0.1`` to ``getaddrinfo``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address
from urllib.parse import SplitResult, urlsplit

MAX_URL_LENGTH = 2048
MAX_HOST_LENGTH = 253

Address = IPv4Address | IPv6Address

_V4_REFUSED = tuple(
    IPv4Network(network)
    for network in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",  # private
        "100.64.0.0/10",  # carrier-grade NAT
        "127.0.0.0/8",  # loopback
        "169.254.0.0/16",  # link-local, cloud metadata (169.254.169.254)
        "172.16.0.0/12",  # private
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",  # documentation (TEST-NET-1)
        "192.88.99.0/24",  # deprecated 6to4 relay anycast
        "192.168.0.0/16",  # private
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",  # documentation (TEST-NET-2)
        "203.0.113.0/24",  # documentation (TEST-NET-3)
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address 255.255.255.255
    )
)

# The only IPv6 space with global unicast addresses, and the parts of it that are not.
_V6_GLOBAL_UNICAST = IPv6Network("2000::/3")
_V6_REFUSED = tuple(
    IPv6Network(network)
    for network in (
        "2001::/23",  # IETF protocol assignments, Teredo 2001::/32 among them
        "2001:db8::/32",  # documentation
        "3fff::/20",  # documentation (RFC 9637)
    )
)
_V4_MAPPED = IPv6Network("::ffff:0:0/96")
_V4_COMPATIBLE = IPv6Network("::/96")
_SIX_TO_FOUR = IPv6Network("2002::/16")
_NAT64 = IPv6Network("64:ff9b::/96")
_NAT64_LOCAL = IPv6Network("64:ff9b:1::/48")
_TEREDO = IPv6Network("2001::/32")

_LEGACY_IPV4 = re.compile(r"(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}", re.I)
_LABEL = re.compile(r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?", re.I)


class UnsafeUrl(ValueError):
    """A webhook URL that clubwire will not send to; the message says why, for people."""


class NonPublicAddress(UnsafeUrl):
    """The URL is fine but its host is, or resolves only to, non-public addresses."""


# -- addresses ---------------------------------------------------------------------------


def is_global(address: Address) -> bool:
    """Whether ``address`` is a globally routable unicast address, embedded forms unpacked.

    Refused on top of the embedded check: IPv4-compatible ``::a.b.c.d`` (deprecated, not
    routed), the NAT64 local-use prefix ``64:ff9b:1::/48`` (not globally reachable; where the
    IPv4 sits in it depends on the operator's prefix length) and Teredo ``2001::/32`` (part
    of ``2001::/23``, which is not globally reachable), whatever they carry.
    """
    if isinstance(address, IPv4Address):
        return _is_global_v4(address)
    if not all(_is_global_v4(inner) for inner in embedded_ipv4(address)):
        return False
    if address in _V4_MAPPED:
        return True
    return _is_global_v6(address)


def embedded_ipv4(address: IPv6Address) -> tuple[IPv4Address, ...]:
    """The IPv4 addresses an IPv6 address carries (Teredo carries two), if any."""
    if address in _V4_MAPPED or address in _V4_COMPATIBLE:
        return (_low32(address),)
    if address in _NAT64 or address in _NAT64_LOCAL:
        return (_low32(address),)
    if address in _SIX_TO_FOUR:
        return (IPv4Address((int(address) >> 80) & 0xFFFFFFFF),)
    if address in _TEREDO:
        server = IPv4Address((int(address) >> 64) & 0xFFFFFFFF)
        client = IPv4Address(~int(address) & 0xFFFFFFFF)  # stored XOR 0xffffffff
        return (server, client)
    return ()


def _low32(address: IPv6Address) -> IPv4Address:
    return IPv4Address(int(address) & 0xFFFFFFFF)


def _is_global_v4(address: IPv4Address) -> bool:
    return address.is_global and not _within(address, _V4_REFUSED)


def _is_global_v6(address: IPv6Address) -> bool:
    if address in _NAT64:
        return True  # the well-known prefix; its embedded address was checked
    return address.is_global and address in _V6_GLOBAL_UNICAST and not _within(address, _V6_REFUSED)


def _within(address: Address, networks: Iterable[IPv4Network | IPv6Network]) -> bool:
    return any(address in network for network in networks)


def display(address: Address) -> str:
    """The address as people read it (IPv4-mapped shown with its dotted IPv4)."""
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return f"::ffff:{address.ipv4_mapped}"
    return str(address)


# -- URL hosts ---------------------------------------------------------------------------


def literal_address(host: str) -> Address | None:
    """The IP address a URL host spells, in any spelling ``getaddrinfo`` accepts; else None.

    Accepts ``[::1]`` and ``::1``, dotted quads, and the legacy ``inet_aton`` forms:
    ``2130706433``, ``017700000001``, ``0177.0.0.1``, ``0x7f000001``, ``0x7f.0.0.1``,
    ``127.1``, ``127.0.1``; trailing dots are ignored. A zone (``%eth0``) is dropped.
    ``1.2.3.example.com`` is a name.
    """
    text = host.strip().removeprefix("[").removesuffix("]").rstrip(".")
    if not text or not text.isascii():
        return None
    if ":" in text:
        return _ipv6_literal(text)
    if _LEGACY_IPV4.fullmatch(text) is None:
        return None
    try:
        return IPv4Address(socket.inet_aton(text))
    except (OSError, ValueError):
        return None


def _ipv6_literal(text: str) -> IPv6Address | None:
    try:
        address = ip_address(text)
    except ValueError:
        return None
    if not isinstance(address, IPv6Address):
        return None
    return IPv6Address(address.packed)  # without the zone


def _is_canonical(host: str, address: Address) -> bool:
    if isinstance(address, IPv6Address):
        return True
    return host == str(address)


def _is_host_name(host: str) -> bool:
    try:
        ascii_host = host.encode("idna").decode("ascii")
    except UnicodeError:
        return False
    labels = ascii_host.removesuffix(".").split(".")
    return len(ascii_host) <= MAX_HOST_LENGTH and all(_LABEL.fullmatch(x) for x in labels)


# -- URLs --------------------------------------------------------------------------------


def check_url(url: str, allow_private: bool) -> SplitResult:
    """The parts of ``url`` if it is a safe webhook URL; else :class:`UnsafeUrl` saying why.

    Names are not resolved here (see :func:`check_resolves_publicly`); literal addresses are
    judged in every spelling. A fragment is refused rather than dropped: it is never sent, so
    a URL with one is not the URL the receiver will see.
    """
    _check_text(url)
    if "#" in url:
        raise UnsafeUrl("URL must not contain a fragment (#…)")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise UnsafeUrl(f"URL is not valid ({exc})") from None
    _check_parts(parts)
    _check_port(parts)
    _check_host(parts.hostname or "", allow_private)
    return parts


def _check_text(url: str) -> None:
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeUrl(f"URL is longer than {MAX_URL_LENGTH} characters")
    if any(char.isspace() or not char.isprintable() for char in url):
        raise UnsafeUrl("URL must not contain spaces or control characters")


def _check_parts(parts: SplitResult) -> None:
    if parts.scheme != "https":
        raise UnsafeUrl("URL must use https://")
    if "@" in parts.netloc:
        raise UnsafeUrl("URL must not contain a user name or password")
    if not parts.hostname:
        raise UnsafeUrl("URL has no host")


def _check_port(parts: SplitResult) -> None:
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port is not None and not 1 <= port <= 65535:
        raise UnsafeUrl("URL port must be a number from 1 to 65535")


def _check_host(host: str, allow_private: bool) -> None:
    address = literal_address(host)
    if address is None:
        if not _is_host_name(host):
            raise UnsafeUrl(f"URL host {host!r} is not a valid host name")
        return
    if not allow_private and not is_global(address):
        raise NonPublicAddress(f"{display(address)} is not a public address")
    if not _is_canonical(host, address):
        raise UnsafeUrl(f"URL host {host} must be written as {display(address)}")


# -- resolution --------------------------------------------------------------------------


def check_resolved(host: str, found: Sequence[str]) -> None:
    """Raise :class:`NonPublicAddress` when a resolver's answer for ``host`` holds addresses,
    none of them public.

    Used when an endpoint is created or edited, to refuse early with a clear message. An empty
    answer (a name that does not resolve yet) passes: every attempt resolves the name again and
    connects only to the public addresses it found (``worker.client``), so this check is a
    courtesy, not the protection.
    """
    if found and not any(is_public_text(text) for text in found):
        listed = ", ".join(dict.fromkeys(found))
        raise NonPublicAddress(f"{host} resolves only to non-public addresses ({listed})")


def parse_address(text: str) -> Address | None:
    """A resolver's answer as an address (a zone such as ``%eth0`` dropped); else None."""
    try:
        address = ip_address(text.partition("%")[0])
    except ValueError:
        return None
    return address


def is_public_text(text: str) -> bool:
    """Whether a resolver's answer is a public address."""
    address = parse_address(text)
    return address is not None and is_global(address)
