"""Another club's ids in a real browser: a club admin who edits a URL, or a form's action, to
reach another club's settings, endpoint, delivery or key gets a 404 page, and nothing
changes."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain.delivering import Status
from clubwire.services.delivery import events
from clubwire.settings import Settings
from clubwire.storage.models import ApiKey, Club, Delivery, Endpoint
from tests.browser.helpers import sign_in
from tests.browser.live_server import StartServer
from tests.factories import (
    EPOCH,
    PASSWORD,
    make_club,
    make_endpoint,
    make_key,
    make_staff,
    registration,
)

pytestmark = [pytest.mark.browser, pytest.mark.sqlite_only]

ADMIN = "secretary@granite.example"


@dataclass(frozen=True)
class Ids:
    """A club's endpoint, delivery and key prefix."""

    endpoint: str
    delivery: str
    prefix: str


def _club_with_a_delivery(session: Session, settings: Settings, slug: str) -> Ids:
    club = make_club(session, slug)
    endpoint, _ = make_endpoint(session, club, settings)
    key, _ = make_key(session, club)
    events.publish(session, club, "registration.created", registration(), EPOCH)
    # Dead, so that no worker touches it while the test looks.
    session.execute(
        update(Delivery)
        .where(Delivery.club_id == club.id)
        .values(status=Status.DEAD, attempt=6, next_attempt_at=None, response_code=503)
    )
    delivery = session.scalars(select(Delivery.id).where(Delivery.club_id == club.id)).one()
    return Ids(endpoint.id, delivery, key.prefix)


def _state(sessions: sessionmaker[Session]) -> tuple[object, ...]:
    with sessions() as session:
        return (
            [(k.club_id, k.revoked_at) for k in session.scalars(select(ApiKey))],
            [
                (e.club_id, e.url, e.events, e.enabled, e.secret_sealed)
                for e in session.scalars(select(Endpoint))
            ],
            [
                (d.club_id, d.status, d.next_attempt_at)
                for d in session.scalars(select(Delivery).order_by(Delivery.id))
            ],
            [(c.slug, c.webhooks_enabled) for c in session.scalars(select(Club))],
        )


def _not_found(page: Page, url: str) -> None:
    response = page.goto(url)
    assert response is not None
    assert response.status == 404, url
    expect(page.get_by_role("heading", name="Not Found")).to_be_visible()


def test_another_clubs_ids_give_404_and_change_nothing(
    sessions: sessionmaker[Session], settings: Settings, start_server: StartServer, page: Page
) -> None:
    with sessions.begin() as session:
        mine = _club_with_a_delivery(session, settings, "granite")
        theirs = _club_with_a_delivery(session, settings, "rocks")
    make_staff(sessions, ADMIN, clubs=["granite"])
    base_url = start_server()
    before = _state(sessions)
    sign_in(page, base_url, ADMIN, PASSWORD)

    # Their slug, and their ids under my slug or theirs, typed into the address bar.
    for path in (
        "/settings/rocks",
        "/settings/rocks/webhooks",
        "/settings/rocks/api-keys",
        f"/settings/rocks/webhooks/{theirs.endpoint}/edit",
        f"/settings/granite/webhooks/{theirs.endpoint}/edit",
        f"/settings/granite/webhooks/{theirs.endpoint}/rotate",
        f"/settings/granite/webhooks/{theirs.endpoint}/delete",
        f"/settings/granite/deliveries/{theirs.delivery}",
        f"/settings/rocks/deliveries/{theirs.delivery}",
        f"/settings/granite/api-keys/{theirs.prefix}/revoke",
        f"/settings/rocks/api-keys/{theirs.prefix}/revoke",
        "/admin",
    ):
        _not_found(page, f"{base_url}{path}")

    # My own forms, their action edited to point at their ids.
    for page_path, old, new, button in (
        (
            f"/settings/granite/webhooks/{mine.endpoint}/delete",
            mine.endpoint,
            theirs.endpoint,
            "Delete endpoint",
        ),
        (
            f"/settings/granite/webhooks/{mine.endpoint}/rotate",
            mine.endpoint,
            theirs.endpoint,
            "Rotate secret",
        ),
        (
            f"/settings/granite/api-keys/{mine.prefix}/revoke",
            mine.prefix,
            theirs.prefix,
            "Revoke key",
        ),
        (
            f"/settings/granite/deliveries/{mine.delivery}",
            mine.delivery,
            theirs.delivery,
            "Retry",
        ),
    ):
        page.goto(f"{base_url}{page_path}")
        page.locator("main form").evaluate(
            "(form, ids) => { form.action = form.action.replace(ids.old, ids.new); }",
            {"old": old, "new": new},
        )
        with page.expect_response(lambda response: response.request.method == "POST") as post:
            page.get_by_role("button", name=re.compile(f"^{button}")).click()
        assert post.value.status == 404, page_path
        expect(page.get_by_role("heading", name="Not Found")).to_be_visible()

    assert _state(sessions) == before
