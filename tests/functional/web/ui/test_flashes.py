"""Post/Redirect/Get everywhere (issue 15, item 1): every form that works answers 303 See
Other, and the page it leads to says what was done, once, in a flash of the session
(ADR 0014); a secret in a flash is sealed in the database and shown to its session only."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta

import pytest
from sqlalchemy import select, text
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import sealing
from clubwire.services import retention
from clubwire.services.staff import flashes
from clubwire.settings import Settings
from clubwire.storage import models
from clubwire.storage.models import ApiKey, Endpoint
from tests.factories import (
    EPOCH,
    FakeClock,
    make_club,
    make_delivery,
    make_endpoint,
    make_key,
    make_staff,
    receiver_settings,
)
from tests.functional.ui_pages import Browser, browser

ADMIN = "admin@granite.example"
ROOT = "root@clubwire.example"
CLUB = "/settings/granite"
TAB = f"{CLUB}/webhooks"
KEYS = f"{CLUB}/api-keys"
WINDOW: dict[str, object] = {"since": "2026-01-05T11:00", "until": "2026-01-05T12:00"}
CONFIRMED = {**WINDOW, "confirmation": "a-confirmation-token-1"}  # as a preview's token reads
FULL_KEY = re.compile(r"cw_live_\w+")
SECRET = re.compile(r"whsec_\w+")


@dataclass(frozen=True)
class World:
    endpoint_id: str
    key_prefix: str
    delivery_id: str


@pytest.fixture
def world(sessions: sessionmaker[Session], settings: Settings) -> World:
    with sessions.begin() as session:
        club = make_club(session, "granite")
        endpoint, _ = make_endpoint(session, club, settings)
        key, _ = make_key(session, club)
        delivery = make_delivery(session, club, endpoint, EPOCH.replace(hour=11, minute=30))
    make_staff(sessions, ADMIN, clubs=["granite"])
    make_staff(sessions, ROOT, superadmin=True)
    return World(endpoint.id, key.prefix, delivery)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def web(settings: Settings, world: World, clock: FakeClock) -> Iterator[Browser]:
    with browser(receiver_settings(settings), clock) as web:
        web.sign_in(ADMIN)
        yield web


def shown(html: str) -> list[tuple[str, str]]:
    """The flash messages at the top of a page, as their ids and words."""
    region = html.split('<div id="flashes"', 1)[1].split("</div>", 1)[0]
    found = re.finditer(r'<p class="outcome \w+" id="([^"]+)">(.*?)</p>', region)
    return [(match[1], match[2]) for match in found]


# What is posted (``{endpoint}``, ``{key}`` and ``{delivery}`` name the world's), with what,
# and words the flash holds.
ACTIONS: list[tuple[str, str, dict[str, object], str]] = [
    ("key created", KEYS, {"name": "Web", "scope": ["read:programs"]}, "created."),
    ("key revoked", f"{KEYS}/{{key}}/revoke", {}, "revoked: the API refuses"),
    (
        "endpoint created",
        TAB,
        {"url": "https://127.0.0.1:9/new", "event": ["registration.created"]},
        "Endpoint https://127.0.0.1:9/new added.",
    ),
    (
        "endpoint updated",
        f"{TAB}/{{endpoint}}/edit",
        {"url": "https://127.0.0.1:9/moved", "event": ["registration.created"]},
        "Endpoint https://127.0.0.1:9/moved saved.",
    ),
    ("endpoint disabled", f"{TAB}/{{endpoint}}/disable", {}, "switched off."),
    ("endpoint enabled", f"{TAB}/{{endpoint}}/enable", {}, "switched on."),
    ("secret rotated", f"{TAB}/{{endpoint}}/rotate", {}, "rotated."),
    ("deleted", f"{TAB}/{{endpoint}}/delete", {}, "deleted, with its deliveries."),
    ("retried", f"{CLUB}/deliveries/{{delivery}}/retry", {}, "will be sent again now."),
    ("replayed", f"{TAB}/{{endpoint}}/replay", CONFIRMED, "Replayed 1 delivery."),
    ("emails", f"{CLUB}/failure-emails", {"wanted": "no"}, "no longer get emails"),
]


@pytest.mark.parametrize(("what", "url", "form", "words"), ACTIONS, ids=[a[0] for a in ACTIONS])
def test_each_action_answers_see_other_and_says_so_once(
    web: Browser,
    world: World,
    what: str,
    url: str,
    form: dict[str, object],
    words: str,
) -> None:
    web.get(TAB)
    named = {"endpoint": world.endpoint_id, "key": world.key_prefix, "delivery": world.delivery_id}
    posted = web.post(url.format(**named), form)
    assert posted.status_code == 303, posted.text
    page = web.get(posted.headers["location"])
    assert page.headers["cache-control"] == "no-store"
    [(_, said)] = shown(page.text)
    assert words in said, what
    assert shown(web.get(posted.headers["location"]).text) == []  # a reload: gone


def test_the_module_switch_says_what_it_did_once(settings: Settings, world: World) -> None:
    with browser(settings) as root:
        root.sign_in(ROOT)
        root.get("/admin")
        off = root.post("/admin/clubs/granite/webhooks", {"enabled": "off"})
        assert (off.status_code, off.headers["location"]) == (303, "/admin#club-granite")
        said = shown(root.get("/admin").text)
        assert said == [
            ("flash-module-off", "Webhooks &amp; API switched off for Granite Curling Club.")
        ]
        assert shown(root.get("/admin").text) == []
        root.post("/admin/clubs/granite/webhooks", {"enabled": "on"})
        assert shown(root.get("/admin").text)[0][0] == "flash-module-on"


def test_a_secret_is_shown_once_and_only_ever_sealed_in_the_database(
    web: Browser, sessions: sessionmaker[Session], settings: Settings, world: World
) -> None:
    web.get(TAB)
    web.post(KEYS, {"name": "Web", "scope": ["read:programs"]})
    web.post(f"{TAB}/{world.endpoint_id}/rotate")
    raw = _raw_rows(sessions)
    key_page = web.get(KEYS).text  # takes both flashes
    (full_key,) = set(FULL_KEY.findall(key_page))
    (secret,) = set(SECRET.findall(key_page))
    assert full_key not in raw
    assert secret not in raw
    assert full_key.rsplit("_", 1)[1] not in raw
    assert key_page.count(full_key) == 1
    with sessions() as session:
        stored = session.scalars(select(Endpoint.secret_sealed)).one()
        assert session.scalars(select(ApiKey.prefix).where(ApiKey.name == "Web")).one() in full_key
    assert sealing.Sealer(settings.secret_key_value()).open(stored) == secret  # the one shown
    assert not FULL_KEY.search(web.get(KEYS).text)
    assert not SECRET.search(web.get(TAB).text)
    assert _raw_rows(sessions) == ""


def _raw_rows(sessions: sessionmaker[Session]) -> str:
    """Every value of every flash row, as the database holds it."""
    with sessions() as session:
        rows = session.execute(text("SELECT * FROM flashes")).all()
    return " ".join(str(value) for row in rows for value in row)


def test_a_flash_is_shown_to_its_own_session_only(
    web: Browser, settings: Settings, world: World, clock: FakeClock
) -> None:
    with browser(settings, clock) as other:
        other.sign_in(ADMIN)  # the same user, another browser
        web.get(KEYS)
        web.post(KEYS, {"name": "Web", "scope": ["read:programs"]})
        assert not FULL_KEY.search(other.get(KEYS).text)
        assert shown(other.get(TAB).text) == []
    assert FULL_KEY.search(web.get(KEYS).text)


def test_a_flash_left_too_long_is_never_shown_and_retention_prunes_it(
    web: Browser, sessions: sessionmaker[Session], world: World, clock: FakeClock
) -> None:
    web.get(KEYS)
    web.post(KEYS, {"name": "Web", "scope": ["read:programs"]})
    clock.advance(seconds=flashes.LIFETIME.total_seconds())
    pruned = retention.prune(sessions, clock(), timedelta(days=30))
    assert pruned.flashes == 1
    web.post(KEYS, {"name": "Later", "scope": ["read:programs"]})
    clock.advance(seconds=flashes.LIFETIME.total_seconds() + 1)
    assert shown(web.get(KEYS).text) == []
    assert _raw_rows(sessions) == ""


def test_signing_out_deletes_the_sessions_flashes(
    web: Browser, sessions: sessionmaker[Session], world: World
) -> None:
    web.get(KEYS)
    web.post(KEYS, {"name": "Web", "scope": ["read:programs"]})
    with sessions() as session:
        assert session.scalars(select(models.Flash.kind)).all() == ["key-created"]
    assert web.post("/sign-out").status_code == 303
    assert _raw_rows(sessions) == ""
