"""Webhook signing secrets: ``whsec_`` and 32 base62 characters (DESIGN §4).

One secret keys both schemes a delivery is signed with. ``X-Service-Signature`` (Stripe's
scheme) is keyed with the UTF-8 of the whole string, prefix included. Standard Webhooks reads
what follows ``whsec_`` as standard base64: base62 is a subset of its alphabet and 32
characters are 24 whole bytes with no padding, so every library decodes the same 24-byte key,
the specification's minimum. Secrets stay base62, not base64 with ``+``, ``/`` and ``=``: they
are copied from the page, pasted into shells and matched by ``whsec_\\w+``, and every secret
issued before Standard Webhooks already decodes the same way.
"""

from __future__ import annotations

from collections.abc import Callable

PREFIX = "whsec_"
LENGTH = 32  # a multiple of 4: whole base64 quanta, no padding


def generate(random_base62: Callable[[int], str]) -> str:
    """A new secret, for both schemes (see above)."""
    return PREFIX + random_base62(LENGTH)
