"""A small browser for the settings-area tests: cookies, CSRF tokens and signed-in staff."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from fastapi.testclient import TestClient
from httpx2 import Response

from clubwire.settings import Settings
from clubwire.web.app import create_app
from tests.factories import PASSWORD, FakeClock

_TOKEN = re.compile(r'name="csrf_token" value="([^"]+)"')
FormData = Mapping[str, object]


def csrf_token(html: str) -> str:
    """The CSRF token of the first form on a page."""
    found = _TOKEN.search(html)
    assert found is not None, "the page has no form with a CSRF token"
    return found.group(1)


class Browser:
    """A TestClient that does not follow redirects and sends the CSRF token it last saw."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.token = ""

    def get(self, url: str, follow: bool = False) -> Response:
        response = self.client.get(url, follow_redirects=follow)
        found = _TOKEN.search(response.text)
        if found:
            self.token = found.group(1)
        return response

    def post(self, url: str, data: FormData | None = None, token: str | None = None) -> Response:
        form = {"csrf_token": self.token if token is None else token, **(data or {})}
        return self.client.post(url, data=form)

    def submit(self, url: str, data: FormData | None = None) -> Response:
        """Post a form that works (answered 303 See Other) and load the page it leads to."""
        posted = self.post(url, data)
        assert posted.status_code == 303, posted.text
        return self.get(posted.headers["location"])

    def sign_in(self, email: str, password: str = PASSWORD, next_path: str = "") -> Response:
        self.get("/sign-in")
        response = self.post("/sign-in", {"email": email, "password": password, "next": next_path})
        if response.status_code == 303:
            self.get("/", follow=True)  # a page with this session's CSRF token
        return response


@contextmanager
def browser(
    settings: Settings, clock: FakeClock | None = None, base_url: str = "http://testserver"
) -> Iterator[Browser]:
    app = create_app(settings, clock or FakeClock())
    with TestClient(app, base_url=base_url, follow_redirects=False) as client:
        yield Browser(client)


def part(html: str, start: str, end: str = "</tr>") -> str:
    """The HTML from ``start`` (an ``id="…"`` or other marker) to the next ``end``."""
    assert start in html, f"{start} is not on the page"
    return html.split(start, 1)[1].split(end, 1)[0]
