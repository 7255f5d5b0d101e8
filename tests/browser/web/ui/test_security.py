"""Browser safety of the settings area, in a real browser: forms with a tampered CSRF token
are refused and change nothing; no page can be framed; hostile text from staff, URLs and
receivers is shown as text and never runs."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal

import pytest
from playwright.sync_api import Dialog, Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.services import clubs
from clubwire.settings import Settings
from clubwire.storage.models import ApiKey, Endpoint
from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.factories import PASSWORD, make_club, make_endpoint, make_key, make_staff
from tests.receiver import Authority

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ROOT = "root@clubwire.example"
ADMIN = "secretary@granite.example"
CLUB = "/settings/granite"
# Were it ever run, the page would get a __pwned and an alert (a dialog).
HOSTILE = "<script>window.__pwned=1;alert(1)</script>"
HOSTILE_IMAGE = '<img src="x" onerror="window.__pwned=1;alert(1)">'
FRAME_ANCESTORS_NONE = re.compile(r"(^|;)\s*frame-ancestors 'none'\s*(;|$)")
TAMPER = """() => document.querySelectorAll('input[name="csrf_token"]')
    .forEach((field) => { field.value = 'forged-' + field.value; })"""


@pytest.fixture
def granite(sessions: sessionmaker[Session], settings: Settings) -> tuple[str, str]:
    """Granite with an endpoint and a key; its id and prefix."""
    with sessions.begin() as session:
        club = make_club(session, "granite", name="Granite Curling Club")
        endpoint, _ = make_endpoint(session, club, settings)
        key, _ = make_key(session, club, name="Club website")
        found = endpoint.id, key.prefix
    make_staff(sessions, ROOT, superadmin=True)
    make_staff(sessions, ADMIN, clubs=["granite"])
    return found


def _state(sessions: sessionmaker[Session]) -> tuple[object, ...]:
    """Everything the refused forms could have changed."""
    with sessions() as session:
        return (
            [(key.name, key.revoked_at) for key in session.scalars(select(ApiKey))],
            [(e.url, e.enabled, e.secret_sealed) for e in session.scalars(select(Endpoint))],
            clubs.get_club(session, "granite").webhooks_enabled,
        )


def test_forms_with_a_tampered_csrf_token_are_refused_and_change_nothing(
    granite: tuple[str, str],
    sessions: sessionmaker[Session],
    start_server: StartServer,
    page: Page,
) -> None:
    endpoint_id, prefix = granite
    base_url = start_server()
    sign_in(page, base_url, ROOT, PASSWORD)
    before = _state(sessions)

    def refused(path: str, submit: str, role: Literal["button", "switch"] = "button") -> None:
        page.goto(f"{base_url}{path}")
        page.evaluate(TAMPER)
        with page.expect_response(lambda response: response.request.method == "POST") as post:
            page.get_by_role(role, name=re.compile(f"^{submit}")).first.click()
        assert post.value.status == 403
        expect(page.get_by_role("heading", name="Form refused")).to_be_visible()
        expect(page.locator("main")).to_contain_text("nothing was changed")

    refused(f"{CLUB}/api-keys", "Create key")
    refused(f"{CLUB}/api-keys/{prefix}/revoke", "Revoke key")
    refused(f"{CLUB}/webhooks/{endpoint_id}/rotate", "Rotate secret")
    refused(f"{CLUB}/webhooks/{endpoint_id}/delete", "Delete endpoint")
    refused("/admin/clubs/granite/webhooks/off", "Switch off")
    # A form htmx sends in the background: the refusal replaces the page's main part.
    refused(f"{CLUB}/webhooks", "Enabled", "switch")
    refused(f"{CLUB}/webhooks", "Sign out")

    assert _state(sessions) == before
    page.goto(f"{base_url}{CLUB}/api-keys")
    expect(page.locator("#tab-api-keys")).to_have_attribute("aria-current", "page")


def test_no_page_can_be_framed(
    granite: tuple[str, str], start_server: StartServer, page: Page
) -> None:
    base_url = start_server()
    sign_in(page, base_url, ADMIN, PASSWORD)
    for path in ("/sign-in", f"{CLUB}/webhooks", f"{CLUB}/api-keys", "/settings"):
        response = page.goto(f"{base_url}{path}")
        assert response is not None
        assert FRAME_ANCESTORS_NONE.search(response.headers["content-security-policy"]), path
        assert response.headers["x-frame-options"] == "DENY", path

    # Another site (localhost is not 127.0.0.1) frames the sign-in page: Chromium refuses,
    # while it shows a page without those headers (the service document) in the same way.
    page.goto(base_url.replace("127.0.0.1", "localhost") + "/openapi.json")
    page.evaluate(
        """(sources) => Promise.all(Object.entries(sources).map(([id, src]) =>
            new Promise((loaded) => {
                const frame = document.createElement("iframe");
                frame.id = id;
                frame.addEventListener("load", loaded);
                frame.src = src;
                document.body.append(frame);
            })))""",
        {"control": f"{base_url}/openapi.json", "victim": f"{base_url}/sign-in"},
    )
    control = page.locator("#control").element_handle().content_frame()
    victim = page.locator("#victim").element_handle().content_frame()
    assert control is not None
    assert victim is not None
    assert control.url == f"{base_url}/openapi.json"
    expect(control.locator("body")).to_contain_text('"openapi"')
    assert victim.url != f"{base_url}/sign-in"
    expect(victim.locator("input")).to_have_count(0)
    expect(victim.locator("body")).not_to_contain_text("Sign in")


class _HostileHandler(BaseHTTPRequestHandler):
    """A receiver that answers every delivery 200 with a hostile HTML body."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = f"{HOSTILE}{HOSTILE_IMAGE}".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def hostile_receiver(tls: Authority) -> Iterator[str]:
    """The URL of a local HTTPS receiver (the ``tls`` CA) that answers with hostile HTML."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _HostileHandler)
    server.socket = tls.server_context().wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/hooks"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_hostile_text_is_shown_as_text_and_never_runs(
    sessions: sessionmaker[Session],
    start_server: StartServer,
    tls: Authority,
    hostile_receiver: str,
    page: Page,
) -> None:
    with sessions.begin() as session:
        make_club(session, "granite", name="Granite Curling Club")
    make_staff(sessions, ADMIN, clubs=["granite"])
    base_url = start_server(ca_bundle=tls.bundle)
    dialogs: list[str] = []

    def dismiss(dialog: Dialog) -> None:
        dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", dismiss)

    def nothing_ran() -> None:
        assert page.evaluate("typeof window.__pwned") == "undefined"
        assert dialogs == []
        expect(page.locator("body script")).to_have_count(0)

    sign_in(page, base_url, ADMIN, PASSWORD)

    # A key's name.
    page.locator("#tab-api-keys").click()
    page.locator("#key-name").fill(HOSTILE)
    page.get_by_role("button", name="Create key").click()
    expect(page.locator("#keys tbody tr td").first).to_have_text(HOSTILE)
    nothing_ran()
    page.locator("#tab-api-keys").click()
    expect(page.locator("section.secret")).to_have_count(0)
    expect(page.locator("#keys tbody tr td").first).to_have_text(HOSTILE)
    nothing_ran()

    # An endpoint's URL (a valid one, with the script in its query).
    url = f"{hostile_receiver}?q={HOSTILE}"
    page.locator("#tab-webhooks").click()
    page.locator("#new-endpoint-url").fill(url)
    page.locator("#new-endpoint-events-registration-created").check()
    page.get_by_role("button", name="Add endpoint").click()
    card = page.locator("article.endpoint")
    expect(card.locator("h3")).to_have_text(url)
    expect(page.locator("#flash-endpoint-created")).to_have_text(f"Endpoint {url} added.")
    nothing_ran()

    # What the receiver answered, stored and shown on the delivery's page.
    page.locator("#tab-webhooks").click()
    expect(page.locator("section.secret")).to_have_count(0)
    card.get_by_role("button", name=re.compile("^Send test")).click()
    expect(page.locator("#flashes")).to_have_text(re.compile(r"^\s*Send test: 200 in \d+ ms\s*$"))
    nothing_ran()
    card.locator("table.deliveries tbody tr").first.get_by_role("link").click()
    expect(page.locator("pre.excerpt")).to_have_text(f"{HOSTILE}{HOSTILE_IMAGE}")
    expect(page.locator("dl.facts code").first).to_have_text(url)
    expect(page.locator("main img")).to_have_count(0)
    nothing_ran()
