"""Other ways to write an IP address that the HTTP client (yarl's UTS #46 mapping) reads as
that very address: Unicode digits, full-width and ideographic dots, and mixtures of them.
Shared by the unit tests of the URL rules and the functional tests of the client.
"""

from __future__ import annotations

from itertools import cycle

# Where each set's zero is; the nine digits follow it.
DIGIT_ZEROS = {
    "full-width": 0xFF10,
    "segmented": 0x1FBF0,
    "mathematical bold": 0x1D7CE,
    "mathematical monospace": 0x1D7F6,
}
FULL_WIDTH_A = 0xFF41  # full-width a; b to f follow it
_IPV6_ZEROS = [DIGIT_ZEROS["full-width"], DIGIT_ZEROS["mathematical bold"]]
DOTS = {"full-width": "\uff0e", "ideographic": "\u3002", "half-width ideographic": "\uff61"}


def _digits(text: str, zero: int) -> str:
    return "".join(chr(zero + int(c)) if c.isdigit() else c for c in text)


def _full_width_hex(text: str) -> str:
    def wide(c: str) -> str:
        if c.isdigit():
            return chr(DIGIT_ZEROS["full-width"] + int(c))
        if c in "abcdef":
            return chr(FULL_WIDTH_A + ord(c) - ord("a"))
        return c

    return "".join(wide(c) for c in text)


def _mixed(text: str, zeros: list[int], dots: list[str]) -> str:
    """Each digit from the next of ``zeros`` in turn, each dot the next of ``dots``."""
    next_zero, next_dot = cycle(zeros), cycle(dots)
    return "".join(
        chr(next(next_zero) + int(c)) if c.isdigit() else next(next_dot) if c == "." else c
        for c in text
    )


def ipv4_spellings(address: str) -> dict[str, str]:
    """URL hosts the client reads as the dotted quad ``address``, by what they use."""
    return {
        "full-width digits and dots": _digits(address, DIGIT_ZEROS["full-width"]).replace(
            ".", DOTS["full-width"]
        ),
        "segmented digits": _digits(address, DIGIT_ZEROS["segmented"]),
        "mathematical digits": _digits(address, DIGIT_ZEROS["mathematical bold"]),
        "ideographic dots": address.replace(".", DOTS["ideographic"]),
        "half-width ideographic dots": address.replace(".", DOTS["half-width ideographic"]),
        "mixed scripts": _mixed(address, list(DIGIT_ZEROS.values()), list(DOTS.values())),
    }


def ipv6_spellings(address: str) -> dict[str, str]:
    """URL hosts (in brackets) the client reads as the IPv6 ``address``."""
    return {
        "full-width hex digits": f"[{_full_width_hex(address)}]",
        "mathematical digits": f"[{_digits(address, DIGIT_ZEROS['mathematical bold'])}]",
        # Inside brackets the client maps these two sets of digits, not segmented ones.
        "mixed scripts": f"[{_mixed(address, _IPV6_ZEROS, ['.'])}]",
    }


def spellings(address: str) -> dict[str, str]:
    return ipv6_spellings(address) if ":" in address else ipv4_spellings(address)


def spelled(addresses: list[str]) -> list[tuple[str, str]]:
    """``(address, host)`` for every spelling of every address that differs from its plain
    form (``::`` has no digit to spell otherwise), for parametrize."""
    return [
        (address, host)
        for address in addresses
        for host in spellings(address).values()
        if host.strip("[]") != address
    ]
