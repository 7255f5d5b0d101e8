"""Every path of the settings area and the superadmin page, and the URLs built from them:
the routers declare their routes with these, and redirects go to what these build. (The
templates write their links out.)"""

from __future__ import annotations

from urllib.parse import quote

from clubwire.storage.models import Club

LANDING = "/"
SIGN_IN = "/sign-in"
SIGN_OUT = "/sign-out"
STATIC = "/static/"

ADMIN = "/admin"
MODULE = f"{ADMIN}/clubs/{{slug}}/webhooks"  # a club's Webhooks & API module, on or off
MODULE_OFF = f"{MODULE}/off"
PAYLOAD_DAYS = f"{ADMIN}/clubs/{{slug}}/payload-days"  # how long a club's payloads are kept

SETTINGS = "/settings"
CLUB = f"{SETTINGS}/{{slug}}"
API_KEYS = f"{CLUB}/api-keys"
KEY_REVOKE = f"{API_KEYS}/{{prefix}}/revoke"
WEBHOOKS = f"{CLUB}/webhooks"
ENDPOINT = f"{WEBHOOKS}/{{endpoint_id}}"
ENDPOINT_EDIT = f"{ENDPOINT}/edit"
ENDPOINT_DELETE = f"{ENDPOINT}/delete"
ENDPOINT_ROTATE = f"{ENDPOINT}/rotate"
ENDPOINT_ENABLE = f"{ENDPOINT}/enable"
ENDPOINT_DISABLE = f"{ENDPOINT}/disable"
SEND_TEST = f"{ENDPOINT}/test"
DELIVERIES = f"{ENDPOINT}/deliveries"
DELIVERY = f"{CLUB}/deliveries/{{delivery_id}}"
RETRY = f"{DELIVERY}/retry"
REPLAY = f"{ENDPOINT}/replay"
REPLAY_PREVIEW = f"{REPLAY}/preview"
FAILURE_EMAILS = f"{CLUB}/failure-emails"

# With LANDING, where every path of the area begins: its security headers go there alone.
PREFIXES = (SIGN_IN, SIGN_OUT, SETTINGS, ADMIN, STATIC)


def is_ui_path(path: str) -> bool:
    return path == LANDING or path.startswith(PREFIXES)


def sign_in_url(next_path: str | None) -> str:
    """The sign-in page, and back to ``next_path`` afterwards."""
    if next_path is None:
        return SIGN_IN
    return f"{SIGN_IN}?next={quote(next_path, safe='/')}"


def admin_url(slug: str) -> str:
    """The superadmin page, at the club's row."""
    return f"{ADMIN}#club-{slug}"


def club_url(club: Club) -> str:
    return CLUB.format(slug=club.slug)


def api_keys_url(club: Club, prefix: str | None = None) -> str:
    """The API keys tab; at a key's row when given its prefix."""
    anchor = f"#key-{prefix}" if prefix else ""
    return API_KEYS.format(slug=club.slug) + anchor


def webhooks_url(club: Club, endpoint_id: str | None = None) -> str:
    """The Webhooks tab; at an endpoint's card when given one."""
    anchor = f"#endpoint-{endpoint_id}" if endpoint_id else ""
    return WEBHOOKS.format(slug=club.slug) + anchor


def emails_url(club: Club) -> str:
    """The Webhooks tab, at its panel of failure emails."""
    return WEBHOOKS.format(slug=club.slug) + "#failure-emails"
