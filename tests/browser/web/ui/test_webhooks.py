"""The Webhooks tab in a real browser, against a real local HTTPS receiver: an endpoint
added (after a form with errors; its secret shown once), tested, switched, edited, rotated
and deleted; deliveries watched, retried and opened; an endpoint switched off after five
dead deliveries.

SQLite only: there ``serve`` delivers in its own process (PostgreSQL needs a worker), and
the same pages are tested on both databases server-side."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Locator, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from clubwire import signing
from clubwire.domain import off_reasons
from clubwire.services import endpoints
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import Endpoint
from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.conftest import PLATFORM_TOKEN
from tests.factories import EPOCH, PASSWORD, make_club, make_endpoint, make_staff, registration
from tests.receiver import Authority, Receiver

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ADMIN = "secretary@granite.example"
TAB = "/settings/granite/webhooks"
SECRET = re.compile(r"whsec_[0-9A-Za-z]+")
WAIT = 10.0


@pytest.fixture
def base_url(
    sessions: sessionmaker[Session], start_server: StartServer, tls: Authority, receiver: Receiver
) -> str:
    """Granite and its admin, and the server trusting the receivers' test CA. It depends on
    ``receiver`` so that the server, stopped first, no longer talks to the receiver when that
    stops (fixtures and finalizers end in the reverse order of their start)."""
    with sessions.begin() as session:
        make_club(session, "granite", name="Granite Curling Club")
    make_staff(sessions, ADMIN, clubs=["granite"])
    return start_server(ca_bundle=tls.bundle)


def _publish(page: Page, base_url: str) -> None:
    """A ``registration.created`` from the platform, through the internal API."""
    response = page.request.post(
        f"{base_url}/internal/v1/clubs/granite/events",
        headers={"Authorization": f"Bearer {PLATFORM_TOKEN}"},
        data={"event": "registration.created", "data": registration()},
    )
    assert response.status == 201, response.text()


def _shows_after_a_while(
    page: Page, url: str, cell: Locator, text: str | re.Pattern[str] | list[str]
) -> None:
    """Open ``url`` again until ``cell`` says ``text``: the worker delivers in the background
    and the tab does not refresh itself (and on SQLite a page's reads are not one snapshot:
    one rendered as a record commits may show the delivery's new state before its
    endpoint's)."""
    deadline = time.monotonic() + WAIT
    while True:
        page.goto(url)
        try:
            expect(cell).to_have_text(text, timeout=250)
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        else:
            return


def _facts(card: Locator) -> Locator:
    return card.locator("dl.facts > dd")


def test_an_endpoint_is_added_tested_switched_edited_rotated_and_deleted(
    base_url: str, page: Page, receiver: Receiver
) -> None:
    sign_in(page, base_url, ADMIN, PASSWORD)
    expect(page).to_have_url(f"{base_url}{TAB}")
    expect(page.locator("#tab-webhooks")).to_have_attribute("aria-current", "page")

    # A form with errors says why beside each field, and keeps what was typed.
    url_field = page.locator("#new-endpoint-url")
    url_field.fill("http://hooks.granite.example/clubwire")
    page.get_by_role("button", name="Add endpoint").click()
    expect(page.locator("#new-endpoint-url-error")).to_contain_text("https://")
    expect(page.locator("#new-endpoint-events-error")).to_contain_text("at least one event")
    expect(url_field).to_have_value("http://hooks.granite.example/clubwire")
    expect(url_field).to_have_attribute("aria-invalid", "true")
    expect(page.locator("article.endpoint")).to_have_count(0)

    url_field.fill(receiver.url)
    page.locator("#new-endpoint-events-registration-created").check()
    page.get_by_role("button", name="Add endpoint").click()

    expect(page.locator("code#new-secret")).to_have_text(SECRET)
    secret = page.locator("code#new-secret").inner_text()
    assert SECRET.fullmatch(secret)
    warning = page.locator("section.secret .warning")
    expect(warning).to_contain_text("Copy it now.")
    expect(warning).to_contain_text("the only time this signing secret is shown")
    expect(page.locator("#flash-endpoint-created")).to_have_text(f"Endpoint {receiver.url} added.")
    expect(page.locator("section.secret").get_by_role("button", name="Copy")).to_be_visible()
    card = page.locator("article.endpoint")
    endpoint_id = (card.get_attribute("id") or "").removeprefix("endpoint-")
    expect(card.locator("h3")).to_have_text(receiver.url)
    expect(_facts(card)).to_have_text(
        [
            "registration.created",
            re.compile("Enabled on"),
            "never",
            "0 of 5",
            "no limit",
            "Any order",
            "none",
        ]
    )

    # Send test: a signed ping, its outcome told at the top of the page.
    page.locator(f"#test-{endpoint_id}").click()
    expect(page.locator(f"#endpoint-{endpoint_id}-test")).to_have_text(
        re.compile(r"^Send test: 200 in \d+ ms$")
    )
    [ping] = receiver.wait_for(1)
    assert ping.headers["X-Service-Event"] == "ping"
    signing.verify(ping.body, ping.headers["X-Service-Signature"], secret)

    # The Enabled switch, off and on again, keeps the keyboard focus.
    switch = page.locator(f"#switch-{endpoint_id}")
    switch.click()
    expect(switch).to_have_attribute("aria-checked", "false")
    expect(page.locator(f"#endpoint-{endpoint_id}-off")).to_have_text(
        re.compile(r"^Switched off by a club admin, since \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\.$")
    )
    expect(switch).to_be_focused()
    switch.click()
    expect(switch).to_have_attribute("aria-checked", "true")
    expect(page.locator(f"#endpoint-{endpoint_id}-off")).to_have_count(0)

    # Edit: the form starts from what is saved.
    card.get_by_role("button", name=re.compile("^Edit")).click()
    expect(page.locator("#endpoint-url")).to_have_value(receiver.url)
    expect(page.locator("#endpoint-events-registration-created")).to_be_checked()
    page.locator("#endpoint-url").fill(f"{receiver.url}?club=granite")
    page.locator("#endpoint-events-payment-completed").check()
    page.get_by_role("button", name="Save changes").click()
    expect(page).to_have_url(f"{base_url}{TAB}#endpoint-{endpoint_id}")
    expect(card.locator("h3")).to_have_text(f"{receiver.url}?club=granite")
    expect(_facts(card).first).to_have_text("registration.created, payment.completed")

    # An event from the platform: delivered, and shown in Recent deliveries.
    _publish(page, base_url)
    _, delivered = receiver.wait_for(2)
    assert delivered.headers["X-Service-Event"] == "registration.created"
    signing.verify(delivered.body, delivered.headers["X-Service-Signature"], secret)
    row = card.locator("table.deliveries tbody tr").first
    _shows_after_a_while(page, f"{base_url}{TAB}", row.locator("td.status"), "succeeded")
    expect(row.locator("td").nth(0)).to_have_text("registration.created")
    expect(row.locator("td").nth(2)).to_have_text("200")
    last_delivery = _facts(card).nth(2)
    _shows_after_a_while(
        page, f"{base_url}{TAB}", last_delivery, re.compile(r" UTC, response code 200$")
    )

    # Rotate: a warning first; the new secret shown once, and the only one that signs.
    card.get_by_role("button", name=re.compile("^Rotate secret")).click()
    expect(page.locator(".confirm .warning")).to_contain_text(
        "The old secret stops working at once."
    )
    assert not SECRET.search(page.content())
    page.get_by_role("button", name="Rotate secret", exact=True).click()
    expect(page.locator("section.secret .warning")).to_contain_text(
        "The old secret has stopped working."
    )
    rotated = page.locator("code#new-secret").inner_text()
    assert SECRET.fullmatch(rotated)
    assert rotated != secret
    _publish(page, base_url)
    *_, signed_anew = receiver.wait_for(3)
    signing.verify(signed_anew.body, signed_anew.headers["X-Service-Signature"], rotated)
    with pytest.raises(signing.SignatureError):
        signing.verify(signed_anew.body, signed_anew.headers["X-Service-Signature"], secret)

    # Delete, after a confirmation.
    page.goto(f"{base_url}{TAB}")
    card.get_by_role("button", name=re.compile("^Delete")).click()
    expect(page.locator(".confirm .warning")).to_contain_text("deliveries and their history")
    page.get_by_role("button", name="Delete endpoint").click()
    expect(page).to_have_url(f"{base_url}{TAB}")
    expect(page.get_by_role("status").locator("#flash-endpoint-deleted")).to_have_text(
        f"Endpoint {receiver.url}?club=granite deleted, with its deliveries."
    )
    expect(page.locator("article.endpoint")).to_have_count(0)
    expect(page.get_by_text("This club has no webhook endpoints yet.")).to_be_visible()


def test_a_failed_delivery_is_retried_and_its_attempts_shown(
    base_url: str, page: Page, receiver: Receiver
) -> None:
    receiver.status = 500
    sign_in(page, base_url, ADMIN, PASSWORD)
    page.locator("#new-endpoint-url").fill(receiver.url)
    page.locator("#new-endpoint-events-registration-created").check()
    page.get_by_role("button", name="Add endpoint").click()
    card = page.locator("article.endpoint")
    expect(card).to_have_count(1)

    _publish(page, base_url)
    receiver.wait_for(1)
    row = card.locator("table.deliveries tbody tr")
    _shows_after_a_while(page, f"{base_url}{TAB}", row.locator("td").nth(2), "500")
    delivery_id = (row.get_attribute("id") or "").removeprefix("delivery-")
    expect(row.locator("td")).to_have_text(
        [
            "registration.created",
            "pending",
            "500",
            "1",
            re.compile(r"^\d{4}-.* UTC$"),
            re.compile("Retry"),
        ]
    )
    last_delivery = _facts(card).nth(2)
    _shows_after_a_while(
        page, f"{base_url}{TAB}", last_delivery, re.compile(r" UTC, response code 500$")
    )

    receiver.status = 200
    page.locator(f"#retry-{delivery_id}").click()
    receiver.wait_for(2)
    _shows_after_a_while(page, f"{base_url}{TAB}", row.locator("td.status"), "succeeded")
    expect(row.locator("td")).to_have_text(
        ["registration.created", "succeeded", "200", "2", "—", re.compile("Retry")]
    )

    # The delivery's page: every attempt, with its code, duration, Retry-After (none here) and
    # the receiver's answer.
    row.get_by_role("link").click()
    expect(page).to_have_url(f"{base_url}/settings/granite/deliveries/{delivery_id}")
    expect(page.locator("#tab-webhooks")).to_have_attribute("aria-current", "page")
    expect(page.locator("dd.status")).to_have_text("succeeded")
    attempts = page.locator("table.attempts tbody tr")
    expect(attempts).to_have_count(2)
    duration = re.compile(r"^\d+ ms$")
    expect(attempts.nth(0).locator("th, td")).to_have_text(
        ["1", "scheduled", re.compile("UTC$"), "500", duration, "—", "answered 500"]
    )
    expect(attempts.nth(1).locator("th, td")).to_have_text(
        ["2", "manual", re.compile("UTC$"), "200", duration, "—", "answered 200"]
    )
    # Retry from the delivery's page comes back to it.
    page.get_by_role("button", name=re.compile("^Retry")).click()
    receiver.wait_for(3)
    _shows_after_a_while(page, page.url, attempts.nth(2).locator("td").first, "manual")
    expect(page).to_have_url(f"{base_url}/settings/granite/deliveries/{delivery_id}")


def _switched_off_after_five_dead(
    sessions: sessionmaker[Session], settings: Settings, url: str
) -> str:
    """What the worker leaves after five dead deliveries, then two events while it is off."""
    with sessions.begin() as session:
        club = make_club(session, "granite", name="Granite Curling Club")
        endpoint, _ = make_endpoint(session, club, settings, url)
        endpoints.disable_endpoint(
            session, club.id, endpoint.id, EPOCH, off_reasons.OffReason.DEAD_IN_A_ROW
        )
        session.get_one(Endpoint, endpoint.id).dead_in_a_row = 5
        for _ in range(2):
            events.publish(session, club, "registration.created", registration(), EPOCH)
        return endpoint.id


def test_an_endpoint_switched_off_after_five_dead_deliveries_offers_to_resend(
    sessions: sessionmaker[Session],
    settings: Settings,
    start_server: StartServer,
    tls: Authority,
    receiver: Receiver,
    page: Page,
) -> None:
    endpoint_id = _switched_off_after_five_dead(sessions, settings, receiver.url)
    make_staff(sessions, ADMIN, clubs=["granite"])
    base_url = start_server(ca_bundle=tls.bundle)
    sign_in(page, base_url, ADMIN, PASSWORD)

    card = page.locator(f"#endpoint-{endpoint_id}")
    expect(page.locator(f"#endpoint-{endpoint_id}-off")).to_have_text(
        "Switched off after 5 dead deliveries in a row, since 2026-01-05 12:00:00 UTC."
    )
    expect(_facts(card).nth(3)).to_have_text("5 of 5")
    rows = card.locator("table.deliveries tbody tr")
    skipped = "skipped (its endpoint or the club's Webhooks & API module was off)"
    expect(rows.locator("td.status")).to_have_text([skipped, skipped])
    expect(card.get_by_role("button", name=re.compile("^Retry"))).to_have_count(0)
    switch = page.locator(f"#switch-{endpoint_id}")
    expect(switch).to_have_attribute("aria-checked", "false")

    page.get_by_label("Also send the 2 deliveries skipped while it was off").check()
    switch.click()

    expect(switch).to_have_attribute("aria-checked", "true")
    expect(page.locator(f"#endpoint-{endpoint_id}-off")).to_have_count(0)
    expect(page.locator(f"#resend-{endpoint_id}")).to_have_count(0)
    receiver.wait_for(2)
    _shows_after_a_while(
        page, f"{base_url}{TAB}", rows.locator("td.status"), ["succeeded", "succeeded"]
    )
    expect(_facts(card).nth(3)).to_have_text("0 of 5")
