"""The settings area's own origins, and what a request from another site looks like (issue 31)."""

from __future__ import annotations

import pytest
from starlette.datastructures import Headers

from clubwire.settings import Settings
from clubwire.web.ui import security

SETTINGS = Settings(_env_file=None, public_url="https://Hooks.Example.org:443")


@pytest.mark.parametrize(
    ("scheme", "host", "expected"),
    [
        ("http", "testserver", "http://testserver"),
        ("http", "TestServer:80", "http://testserver"),
        ("https", "hooks.example.org:443", "https://hooks.example.org"),
        ("https", "hooks.example.org:8443", "https://hooks.example.org:8443"),
        ("http", "[::1]:8000", "http://[::1]:8000"),
        ("http", "", None),
        ("http", "[::1", None),
        ("http", "host:port", None),
        ("http", "host:99999", None),
        ("http", "user@host", None),
        ("http", "host/path", None),
        ("http", "ho st", None),
        ("http", "host\n", None),
        ("ftp", "host", None),
    ],
)
def test_origin(scheme: str, host: str, expected: str | None) -> None:
    assert security.origin(scheme, host) == expected


def _refusal(host: str = "testserver", scheme: str = "http", **sent: str) -> str | None:
    headers = Headers({"host": host, **{k.replace("_", "-"): v for k, v in sent.items()}})
    return security.from_another_site(headers, scheme, SETTINGS)


@pytest.mark.parametrize(
    "sent",
    [
        {},
        {"sec_fetch_site": "same-origin"},
        {"sec_fetch_site": "none"},
        {"origin": "http://testserver"},
        {"origin": "http://testserver:80"},
        {"origin": "https://hooks.example.org"},
        {"origin": "HTTPS://HOOKS.EXAMPLE.ORG"},
        {"sec_fetch_site": "same-origin", "origin": "http://testserver"},
    ],
)
def test_ours(sent: dict[str, str]) -> None:
    assert _refusal(**sent) is None


@pytest.mark.parametrize(
    ("sent", "why"),
    [
        ({"sec_fetch_site": "cross-site"}, 'Sec-Fetch-Site: "cross-site"'),
        ({"sec_fetch_site": "same-site"}, 'Sec-Fetch-Site: "same-site"'),
        ({"sec_fetch_site": "Same-Origin"}, 'Sec-Fetch-Site: "Same-Origin"'),
        ({"origin": "null"}, 'Origin: "null"'),
        ({"origin": "http://hooks.example.org"}, 'Origin: "http://hooks.example.org"'),
        ({"origin": "https://granite.hooks.example.org"}, 'Origin: "https://granite.hooks.'),
        ({"origin": "http://testserver/"}, 'Origin: "http://testserver/"'),
        ({"origin": "testserver"}, 'Origin: "testserver"'),
        ({"origin": "http://evil\x1b[31m"}, 'Origin: "http://evil\\x1b[31m"'),
    ],
)
def test_another_sites(sent: dict[str, str], why: str) -> None:
    found = _refusal(**sent)
    assert found is not None
    assert found.startswith(why)


def test_the_scheme_is_the_requests_as_the_app_sees_it() -> None:
    """Behind a trusted proxy uvicorn takes the scheme from ``X-Forwarded-Proto``."""
    assert _refusal(scheme="https", origin="https://testserver") is None
    assert _refusal(scheme="http", origin="https://testserver") is not None
