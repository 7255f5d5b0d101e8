"""Which webhook URLs and addresses are safe to send to (DESIGN §7), as pure functions.

A receiver must be reached over ``https://`` at a globally routable unicast address. An
address is judged after unpacking the forms that carry an IPv4 address inside an IPv6 one
(IPv4-mapped, IPv4-compatible, 6to4, NAT64, Teredo): the embedded address must be global
too. ``ipaddress``'s own ``is_global`` is the base, but on its own it lets through, among
others, multicast, ``192.0.0.8``, ``fec0::/10``, ``::127.0.0.1``, ``64:ff9b::7f00:1`` and
``2002:7f00:1::`` (Python 3.11), so the rules below add to it.

A URL is read once, the way the HTTP client (aiohttp, through yarl) will read it: its host
mapped with UTS #46, so ``🯱🯰.🯰.🯰.🯱``, ``１２７．０．０．１`` and ``127。0。0。1`` are the IP
literals ``10.0.0.1`` and ``127.0.0.1``, and every check judges that reading, never the text.
The host is then read as the system resolver would read it: ``2130706433``, ``0x7f.1`` and
``017700000001`` all mean ``127.0.0.1`` to ``getaddrinfo``.
"""

from __future__ import annotations

import re
import socket
from collections.abc import Iterable, Sequence
from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_address

from yarl import URL

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


def _is_canonical(written: str, address: Address) -> bool:
    """Whether the URL spells the address plainly: dotted-quad IPv4, ASCII IPv6."""
    if isinstance(address, IPv4Address):
        return written == str(address)
    return written.isascii() and _ipv6_literal(written.strip("[]")) == address


def _is_host_name(host: str) -> bool:
    """Whether ``host`` (ASCII, as the client reads it) is a DNS name."""
    labels = host.removesuffix(".").split(".")
    return len(host) <= MAX_HOST_LENGTH and all(_LABEL.fullmatch(x) for x in labels)


# -- URLs --------------------------------------------------------------------------------


def check_url(url: str, allow_private: bool) -> URL:
    """``url`` as the HTTP client reads it, if it is a safe webhook URL; else
    :class:`UnsafeUrl` saying why.

    Its ``raw_host`` is the host the client will connect to (a name it resolves, or a literal
    it connects to directly): that reading is what is judged. Names are not resolved here
    (see :func:`check_resolved`); literal addresses are judged in every spelling. A fragment
    is refused rather than dropped: it is never sent, so a URL with one is not the URL the
    receiver will see.
    """
    _check_text(url)
    if "#" in url:
        raise UnsafeUrl("URL must not contain a fragment (#…)")
    read = _read(url)
    _check_parts(read)
    _check_host(url, read, allow_private)
    return read


def _check_text(url: str) -> None:
    if len(url) > MAX_URL_LENGTH:
        raise UnsafeUrl(f"URL is longer than {MAX_URL_LENGTH} characters")
    if any(char.isspace() or not char.isprintable() for char in url):
        raise UnsafeUrl("URL must not contain spaces or control characters")


# yarl's words for what it cannot read, as ours (the rest are shown as they are).
_READING_ERRORS = (
    ("host is required", "URL has no host"),
    ("port", "URL port must be a number from 1 to 65535"),
)


def _read(url: str) -> URL:
    if not url.lower().startswith("https://"):
        raise UnsafeUrl("URL must use https://")
    try:
        return URL(url)
    except Exception as exc:  # yarl's parser raises IndexError, too, on some garbage
        raise UnsafeUrl(_reading_error(exc)) from None


def _reading_error(exc: Exception) -> str:
    """yarl's or idna's reason a URL cannot be read, in our words, never echoing the URL."""
    words = str(exc).split(":")[0] if isinstance(exc, UnicodeError | IndexError) else str(exc)
    words = words.removeprefix("Invalid URL: ")
    for fragment, ours in _READING_ERRORS:
        if fragment in words.lower():
            return ours
    return f"URL is not valid ({words or type(exc).__name__})"


def _check_parts(read: URL) -> None:
    if read.raw_user is not None or read.raw_password is not None:
        raise UnsafeUrl("URL must not contain a user name or password")
    if not read.raw_host:
        raise UnsafeUrl("URL has no host")
    if read.explicit_port == 0:
        raise UnsafeUrl("URL port must be a number from 1 to 65535")


def _check_host(url: str, read: URL, allow_private: bool) -> None:
    host = read.raw_host or ""
    written = URL(url, encoded=True).raw_host or host  # as typed, for messages
    address = literal_address(host)
    if address is None:
        if not _is_host_name(host):
            raise UnsafeUrl(f"URL host {written!r} is not a valid host name")
        return
    if not allow_private and not is_global(address):
        raise NonPublicAddress(f"{display(address)} is not a public address")
    if not _is_canonical(written, address):
        raise UnsafeUrl(f"URL host {written} must be written as {display(address)}")


# -- resolution --------------------------------------------------------------------------


def check_resolved(host: str, found: Sequence[str]) -> None:
    """Raise :class:`NonPublicAddress` when a resolver's answer for ``host`` holds addresses,
    none of them public.

    Used when an endpoint is created or edited, to refuse early with a clear message. An empty
    answer (a name that does not resolve yet) passes: every attempt resolves the name again and
    connects only to the public addresses it found (``services.delivery.outbound``), so this
    check is a courtesy, not the protection.
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
