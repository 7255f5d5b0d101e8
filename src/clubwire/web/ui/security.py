"""Browser safety for the settings area: security headers, cookies, CSRF tokens, requests
from other sites, safe redirects.

The headers go on the UI's paths only (chosen by prefix, ``urls.is_ui_path``), so the club
data API's hot path pays one string comparison and nothing else.
"""

from __future__ import annotations

import hmac
import secrets
from urllib.parse import urlsplit

from starlette.datastructures import Headers, MutableHeaders
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clubwire.domain import text
from clubwire.settings import Settings
from clubwire.web.ui import urls

SESSION_COOKIE = "clubwire_session"
SIGN_IN_COOKIE = "clubwire_sign_in"  # the sign-in form's double-submit CSRF token
DEVICE_COOKIE = "clubwire_device"  # a browser a user signed in with (domain.device_tokens)
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# What a browser says of a request that one of our own pages made (or a person typed in):
# anything else, ``same-site`` too (a sibling host, such as a club's host with
# CLUBWIRE_CLUB_HOST_SUFFIX, shares the site but is not us), is another site's.
OWN_FETCH_SITES = frozenset({"same-origin", "none"})
_DEFAULT_PORTS = {"http": 80, "https": 443}
_NOT_IN_A_HOST = frozenset(" /?#@\\")  # urlsplit would read a path, user or such into it
SHOWN_HEADER = 100  # characters of a refused header quoted in the log

CONTENT_SECURITY_POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "frame-ancestors 'none'",
        "base-uri 'none'",
        "form-action 'self'",
    )
)
HEADERS = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "same-origin"),
)


class SecurityHeaders:
    """ASGI middleware: the security headers on every UI response, and ``no-store`` on every
    UI page (pages carry CSRF tokens and sometimes a secret shown once)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not urls.is_ui_path(scope["path"]):
            await self.app(scope, receive, send)
            return
        static = scope["path"].startswith(urls.STATIC)

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                _add_headers(MutableHeaders(scope=message), static)
            await send(message)

        await self.app(scope, receive, send_with_headers)


def _add_headers(headers: MutableHeaders, static: bool) -> None:
    for name, value in HEADERS:
        headers[name] = value
    if not static and "cache-control" not in headers:
        headers["Cache-Control"] = "no-store"


def is_https(request: Request, settings: Settings) -> bool:
    return request.url.scheme == "https" or settings.public_url.startswith("https:")


def set_cookie(
    response: Response, name: str, value: str, *, secure: bool, max_age: int | None = None
) -> None:
    """A cookie for this site only: HttpOnly, SameSite=Lax, Path=/; for the browser's session
    unless it has a ``max_age`` (seconds)."""
    response.set_cookie(
        name, value, max_age=max_age, path="/", secure=secure, httponly=True, samesite="lax"
    )


def clear_cookie(response: Response, name: str, *, secure: bool) -> None:
    response.delete_cookie(name, path="/", secure=secure, httponly=True, samesite="lax")


def new_token() -> str:
    return secrets.token_urlsafe(32)


def same_token(given: str | None, expected: str | None) -> bool:
    """Whether a submitted CSRF token is the expected one, compared in constant time."""
    if not given or not expected:
        return False
    return hmac.compare_digest(given.encode(), expected.encode())


def from_another_site(headers: Headers, scheme: str, settings: Settings) -> str | None:
    """Why a request that changes something was sent by another site's page, in words for
    the log; None when a browser says it is ours, or says nothing (curl, older browsers:
    the CSRF token alone decides). ``scheme`` is the request's, as the app sees it."""
    site = headers.get("sec-fetch-site")
    if site is not None and site not in OWN_FETCH_SITES:
        return f"Sec-Fetch-Site: {_shown(site)}"
    given = headers.get("origin")
    if given is not None and _read_origin(given) not in own_origins(headers, scheme, settings):
        return f"Origin: {_shown(given)}"  # ``null`` too: a sandboxed frame, a data: URL
    return None


def _read_origin(value: str) -> str | None:
    """An ``Origin`` header as ``origin`` writes one; None for ``null`` or anything else
    that is not ``scheme://host[:port]``."""
    scheme, separator, host = value.partition("://")
    return origin(scheme.lower(), host) if separator and scheme.isascii() else None


def own_origins(headers: Headers, scheme: str, settings: Settings) -> set[str]:
    """The origins the settings area is ours at: CLUBWIRE_PUBLIC_URL's, and the one this
    request was sent to (its Host, with its scheme as the app sees it, which counts
    ``X-Forwarded-Proto`` from CLUBWIRE_TRUSTED_PROXIES only)."""
    public = urlsplit(settings.public_url)
    found = (origin(public.scheme, public.netloc), origin(scheme, headers.get("host", "")))
    return {each for each in found if each is not None}


def origin(scheme: str, host: str) -> str | None:
    """``scheme://host[:port]`` as a browser writes an ``Origin``: lower case, without the
    scheme's default port; None when ``host`` is not a host (and port)."""
    if scheme not in _DEFAULT_PORTS or not host.isprintable() or _NOT_IN_A_HOST & set(host):
        return None
    try:
        parts = urlsplit(f"{scheme}://{host}")
        port = parts.port
    except ValueError:  # not a port, or a broken IPv6 address
        return None
    if not parts.hostname:
        return None
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    shown_port = "" if port in (None, _DEFAULT_PORTS.get(scheme)) else f":{port}"
    return f"{scheme}://{name}{shown_port}"


def _shown(value: str) -> str:
    return f'"{text.cleaned(value, SHOWN_HEADER)}"'


def safe_next(value: str | None) -> str | None:
    """``value`` if it is a path on this site (``/settings/…``), else None: never another host."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return None
    if any(not char.isprintable() or char == "\\" for char in value):
        return None
    parts = urlsplit(value)
    return value if not (parts.scheme or parts.netloc) else None
