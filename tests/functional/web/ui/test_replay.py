"""Replay… in the Webhooks tab (issue 14, item 1): form, preview, confirmation, the outcome
shown once after the redirect (a flash), the same confirmation again doing nothing, a second
replay that replays nothing twice, and refusals as form errors."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import off_reasons
from clubwire.services import endpoints
from clubwire.settings import Settings
from clubwire.storage.models import Delivery
from tests.factories import EPOCH, FakeClock, make_club, make_delivery, make_endpoint, make_staff
from tests.functional.ui_pages import Browser, browser, part

ADMIN = "admin@granite.example"
TAB = "/settings/granite/webhooks"
WINDOW = {"since": "2026-01-05T12:00", "until": "2026-01-05T13:00"}


@dataclass(frozen=True)
class World:
    club_id: str
    endpoint_id: str

    @property
    def form(self) -> str:
        return f"{TAB}/{self.endpoint_id}/replay"


@pytest.fixture
def world(sessions: sessionmaker[Session], settings: Settings) -> World:
    """Five dead deliveries of granite's endpoint, 12:01 to 12:05."""
    with sessions.begin() as session:
        club = make_club(session, "granite")
        endpoint, _ = make_endpoint(session, club, settings)
        for minute in range(1, 6):
            make_delivery(session, club, endpoint, EPOCH.replace(minute=minute))
    make_staff(sessions, ADMIN, clubs=["granite"])
    return World(club.id, endpoint.id)


@pytest.fixture
def web(settings: Settings, world: World) -> Iterator[Browser]:
    with browser(settings, FakeClock()) as web:
        web.sign_in(ADMIN)
        web.get(TAB)
        yield web


def _confirmation(web: Browser, world: World, fields: dict[str, str] | None = None) -> str:
    """The token of the preview's confirmation (``fields``: the window, by default WINDOW)."""
    preview = web.post(f"{world.form}/preview", fields or WINDOW)
    assert preview.status_code == 200, preview.text
    return part(preview.text, 'name="confirmation" value="', '"')


def _due(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        query = select(func.count()).where(Delivery.next_attempt_at.is_not(None))
        return session.scalar(query) or 0


def test_preview_then_confirm_replays_once_and_says_so_once(
    web: Browser, world: World, sessions: sessionmaker[Session]
) -> None:
    tab = web.get(TAB).text
    assert f'action="{world.form}"' in tab
    form = web.get(world.form)
    assert form.status_code == 200
    assert 'type="datetime-local"' in form.text
    assert 'value="2026-01-04T12:01"' in form.text  # the last day, to the next minute

    preview = web.post(f"{world.form}/preview", {**WINDOW, "status": "dead"})
    assert preview.status_code == 200, preview.text
    assert "5 deliveries will be replayed." in part(preview.text, 'id="replay-count"', "</p>")
    assert "Replay 5 deliveries" in preview.text
    assert _due(sessions) == 0

    token = part(preview.text, 'name="confirmation" value="', '"')
    other_tab = _confirmation(web, world, {**WINDOW, "status": "dead"})
    confirmed = web.post(world.form, {**WINDOW, "status": "dead", "confirmation": token})
    assert confirmed.status_code == 303
    assert confirmed.headers["location"] == f"{TAB}#endpoint-{world.endpoint_id}"
    assert _due(sessions) == 5
    shown = web.get(TAB).text
    notice = part(shown, f'id="endpoint-{world.endpoint_id}-replayed"', "</p>")
    assert "Replayed 5 deliveries." in notice
    assert "replayed" not in web.get(TAB).text.split("Recent deliveries")[0].lower()  # once

    again = web.post(world.form, {**WINDOW, "status": "dead", "confirmation": token})
    assert again.status_code == 303  # a double click, a resubmit: back to the tab, and
    assert again.headers["location"] == confirmed.headers["location"]
    assert _due(sessions) == 5
    assert "replayed" not in web.get(TAB).text.split("Recent deliveries")[0].lower()  # no word

    mine_again = {**WINDOW, "status": "dead", "confirmation": other_tab}  # previewed before
    assert web.post(world.form, mine_again).is_redirect
    assert _due(sessions) == 5
    assert "No delivery in this window can be replayed." in web.get(TAB).text


@pytest.mark.parametrize("token", ["", "forged", "x" * 23, "a" * 21 + "\x00", "é" * 22])
def test_a_confirmation_it_did_not_make_is_a_form_error(
    web: Browser, world: World, sessions: sessionmaker[Session], token: str
) -> None:
    answer = web.post(world.form, {**WINDOW, "confirmation": token})
    assert answer.status_code == 422
    assert "preview again, then confirm" in part(answer.text, 'id="replay-form-error"', "</p>")
    assert _due(sessions) == 0


def test_the_preview_says_when_the_window_holds_more_than_the_limit(
    settings: Settings, world: World
) -> None:
    with browser(settings.model_copy(update={"replay_limit": 2}), FakeClock()) as web:
        web.sign_in(ADMIN)
        web.get(TAB)
        preview = web.post(f"{world.form}/preview", WINDOW).text
    assert "2 of 5 deliveries will be replayed; narrow the window or replay again after." in (
        preview
    )
    assert "Replay 2 deliveries" in preview


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"since": "tomorrow"}, "From must be a time to the minute"),
        ({"until": "2026-01-05T11:00"}, "since must be before until"),
        ({"status": "pending"}, "&#34;pending&#34; is not a status a replay can choose"),
        ({"event": "ping"}, "&#34;ping&#34; is not an event kind that can be replayed"),
        ({"since": "2026-01-05T12:00\x00"}, "NUL"),
    ],
)
def test_bad_input_comes_back_as_form_errors(
    web: Browser, world: World, sessions: sessionmaker[Session], fields: dict[str, str], needle: str
) -> None:
    for action in (f"{world.form}/preview", world.form):
        answer = web.post(action, {**WINDOW, **fields})
        assert answer.status_code == 422, answer.text
        assert needle in answer.text
        assert 'id="replay-preview"' in answer.text  # the form, to fix
    assert _due(sessions) == 0


def test_an_undecodable_byte_is_a_form_error(web: Browser, world: World) -> None:
    body = f"csrf_token={web.token}&since=2026-01-05T12%3A00&until=2026-01-05T13%3A%FF"
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    answer = web.client.post(f"{world.form}/preview", content=body, headers=form)
    assert answer.status_code == 422
    assert "To must be a time to the minute" in answer.text


def test_an_endpoint_switched_off_meanwhile_is_a_form_error(
    web: Browser, world: World, sessions: sessionmaker[Session]
) -> None:
    token = _confirmation(web, world)
    with sessions.begin() as session:
        endpoints.disable_endpoint(
            session, world.club_id, world.endpoint_id, EPOCH, off_reasons.OffReason.STAFF
        )
    assert f'action="{world.form}"' not in web.get(TAB).text
    answer = web.post(world.form, {**WINDOW, "confirmation": token})
    assert answer.status_code == 422
    assert "switch it on to replay" in part(answer.text, 'id="replay-form-error"', "</p>")
    assert _due(sessions) == 0


def test_a_replay_without_the_csrf_token_is_refused(
    web: Browser, world: World, sessions: sessionmaker[Session]
) -> None:
    assert web.post(world.form, WINDOW, token="forged").status_code == 403
    assert _due(sessions) == 0


def test_a_capped_replay_says_what_is_left_once(settings: Settings, world: World) -> None:
    """The outcome travels in a flash of the session (ADR 0014): words our code composed."""
    with browser(settings.model_copy(update={"replay_limit": 2}), FakeClock()) as web:
        web.sign_in(ADMIN)
        web.get(TAB)
        token = _confirmation(web, world)
        assert web.post(world.form, {**WINDOW, "confirmation": token}).status_code == 303
        first, second = web.get(TAB).text, web.get(TAB).text
    notice = part(first, f'id="endpoint-{world.endpoint_id}-replayed"', "</p>")
    assert "Replayed 2 of 5 deliveries; replay again for the rest." in notice
    assert f'id="endpoint-{world.endpoint_id}-replayed"' not in second
