"""The demo club: realistic programs (some private, some not active), a fresh key, staff
sign-ins, an endpoint for the demo's receiver, and realistic events about its programs."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from urllib.parse import urlsplit

from sqlalchemy import select
from sqlalchemy.orm import Session

from clubwire.domain import event_catalog, program_wire, scopes
from clubwire.services import clubs, endpoints, programs
from clubwire.services.club_api import keys
from clubwire.services.delivery import events
from clubwire.services.staff import users
from clubwire.settings import Settings
from clubwire.storage.models import ApiKey, Club, Endpoint, Event, User

SLUG = "granite"
NAME = "Granite Curling Club"
KEY_NAME = "Demo key"
RECEIVER_PATH = "/demo-receiver"  # marks the demo's endpoint among the club's
_TAX = Decimal("1.13")  # Ontario HST, as in the catalog's samples

P = program_wire.ProgramType
S = program_wire.ProgramStatus


@dataclass(frozen=True)
class _Entry:
    id: str
    name: str
    type: program_wire.ProgramType
    status: program_wire.ProgramStatus
    starts_in_days: int
    lasts_days: int
    hour: float
    price: str
    capacity: int
    text: str
    private: bool = False


_PROGRAMS = [
    _Entry(
        "tue-night-league",
        "Tuesday Night League",
        P.LEAGUE,
        S.ACTIVE,
        10,
        120,
        18.5,
        "325.00",
        48,
        "Social league, two draws a night, teams of four. Skip or spare.",
    ),
    _Entry(
        "wed-daytime-league",
        "Wednesday Daytime League",
        P.LEAGUE,
        S.ACTIVE,
        11,
        120,
        10,
        "275.00",
        32,
        "Relaxed daytime curling followed by coffee in the lounge.",
    ),
    _Entry(
        "thu-competitive",
        "Thursday Competitive League",
        P.LEAGUE,
        S.ACTIVE,
        12,
        120,
        19,
        "360.00",
        32,
        "Eight-end games with a playoff round in March.",
    ),
    _Entry(
        "fri-mixed-doubles",
        "Friday Mixed Doubles",
        P.LEAGUE,
        S.ACTIVE,
        13,
        100,
        19.5,
        "190.00",
        24,
        "Mixed doubles with power play; bring a partner or we will find one.",
    ),
    _Entry(
        "sun-juniors",
        "Sunday Juniors",
        P.LEAGUE,
        S.ACTIVE,
        15,
        110,
        9,
        "120.00",
        40,
        "Ages 10–18. Stick and sliding technique, strategy, and fun.",
    ),
    _Entry(
        "learn-to-curl-jan",
        "Learn to Curl: January",
        P.LEARN_TO_CURL,
        S.ACTIVE,
        20,
        28,
        18,
        "95.00",
        24,
        "Four evenings that take you from your first slide to your first game.",
    ),
    _Entry(
        "learn-to-curl-feb",
        "Learn to Curl: February",
        P.LEARN_TO_CURL,
        S.ACTIVE,
        48,
        28,
        18,
        "95.00",
        24,
        "Four evenings that take you from your first slide to your first game.",
    ),
    _Entry(
        "sweeping-clinic",
        "Sweeping Clinic with Coach Ana",
        P.CLINIC,
        S.ACTIVE,
        25,
        1,
        13,
        "45.00",
        16,
        "Technique and fitness for sweepers; brooms provided.",
    ),
    _Entry(
        "delivery-clinic",
        "Delivery Clinic",
        P.CLINIC,
        S.ACTIVE,
        32,
        1,
        13,
        "45.00",
        16,
        "Video analysis of your delivery with a certified coach.",
    ),
    _Entry(
        "winter-bonspiel",
        "Winter Warmer Bonspiel",
        P.BONSPIEL,
        S.ACTIVE,
        40,
        3,
        8,
        "240.00",
        64,
        "Sixteen teams, three days, a banquet on Saturday night.",
    ),
    _Entry(
        "masters-spiel",
        "Masters Bonspiel (55+)",
        P.BONSPIEL,
        S.ACTIVE,
        70,
        2,
        9,
        "200.00",
        48,
        "Four-game guarantee for teams aged 55 and over.",
    ),
    _Entry(
        "friday-drop-in",
        "Friday Drop-In",
        P.DROP_IN,
        S.ACTIVE,
        5,
        150,
        17,
        "15.00",
        32,
        "Come alone or with friends; we make up teams at the door.",
    ),
    _Entry(
        "spring-bonspiel",
        "Spring Fling Bonspiel",
        P.BONSPIEL,
        S.DRAFT,
        130,
        2,
        9,
        "220.00",
        48,
        "Still being planned: not on the storefront yet.",
    ),
    _Entry(
        "board-retreat",
        "Board Strategy Retreat",
        P.OTHER,
        S.ACTIVE,
        30,
        1,
        10,
        "0.00",
        12,
        "For the board of directors only.",
        private=True,
    ),
    _Entry(
        "fall-league-2025",
        "Fall League 2025",
        P.LEAGUE,
        S.COMPLETED,
        -120,
        90,
        18.5,
        "300.00",
        48,
        "Finished: kept for the records.",
    ),
]


@dataclass(frozen=True)
class Seeded:
    slug: str
    key: str
    program_count: int


def seed(session: Session, now: datetime) -> Seeded:
    """Create or refresh the demo club, switch its module on, and issue a new demo key.

    Earlier demo keys are revoked, so only the key printed last works.
    """
    club, _ = clubs.put_club(session, SLUG, NAME, now)
    clubs.set_webhooks_module(session, SLUG, True, now)
    season = datetime(now.year, now.month, now.day, tzinfo=UTC)
    programs.import_programs(session, club, [_record(entry, season) for entry in _PROGRAMS], now)
    for old in session.scalars(
        select(ApiKey).where(ApiKey.club_id == club.id, ApiKey.name == KEY_NAME)
    ):
        keys.revoke_key(session, club.id, old.prefix, now)
    _, value = keys.create_key(session, club, [scopes.READ_PROGRAMS], KEY_NAME, now)
    return Seeded(slug=SLUG, key=value, program_count=len(_PROGRAMS))


def _record(entry: _Entry, season: datetime) -> program_wire.ProgramRecord:
    start = season + timedelta(days=entry.starts_in_days, hours=entry.hour)
    return program_wire.ProgramRecord(
        id=entry.id,
        name=entry.name,
        description=entry.text,
        type=entry.type,
        status=entry.status,
        start_date=start,
        end_date=start + timedelta(days=entry.lasts_days, hours=3),
        price=Decimal(entry.price),
        capacity=entry.capacity,
        private=entry.private,
    )


_ON_SALE = tuple(entry for entry in _PROGRAMS if entry.status is S.ACTIVE and not entry.private)
_COMPETITIONS = tuple(entry for entry in _ON_SALE if entry.type in (P.LEAGUE, P.BONSPIEL))


@dataclass(frozen=True)
class SignIn:
    """A demo staff account: fixed, printed credentials, for a demo served on 127.0.0.1."""

    email: str
    password: str
    superadmin: bool


SIGN_INS = (
    SignIn("admin@clubwire.demo", "granite-demo-superadmin", True),
    SignIn("manager@granite.demo", "granite-demo-manager", False),
)


def seed_staff(session: Session, now: datetime) -> None:
    """The demo's superadmin and the demo club's admin (``SIGN_INS``), created once."""
    for staff in SIGN_INS:
        if session.scalar(select(User.id).where(User.email == staff.email)) is None:
            managed = () if staff.superadmin else (SLUG,)
            users.create_user(session, staff.email, staff.password, now, staff.superadmin, managed)


def seed_endpoint(session: Session, now: datetime, settings: Settings, url: str) -> str:
    """Point the demo's endpoint (made once, for every event) at ``url``; returns its secret.

    The secret is new on every start: only the demo's own receiver needs to know it.
    """
    club = clubs.get_club(session, SLUG)
    found = receiver_endpoint(session, club)
    if found is None:
        _, secret = endpoints.create_endpoint(
            session, club, url, event_catalog.SUBSCRIBABLE, now, settings
        )
        return secret
    endpoints.update_endpoint(session, club.id, found.id, now, settings, url=url)
    return endpoints.rotate_secret(session, club.id, found.id, now, settings)


def receiver_endpoint(session: Session, club: Club) -> Endpoint | None:
    """The demo's endpoint, the one that points at the demo's receiver (if made yet)."""
    return next(
        (
            endpoint
            for endpoint in endpoints.list_endpoints(session, club.id)
            if urlsplit(endpoint.url).path == RECEIVER_PATH
        ),
        None,
    )


def publish_random(session: Session, now: datetime, rng: random.Random) -> Event:
    """Publish an event of a random kind about the demo club, the way the platform does."""
    kind = rng.choice(event_catalog.SUBSCRIBABLE)
    club = clubs.get_club(session, SLUG)
    event, _ = events.publish(session, club, kind, event_data(kind, now, rng), now)
    return event


def event_data(kind: str, now: datetime, rng: random.Random) -> dict[str, object]:
    """The catalog's sample of ``kind``, made about one of the demo club's programs on sale."""
    data = event_catalog.sample(kind, now, rng)
    entry = rng.choice(_COMPETITIONS if kind == "game.updated" else _ON_SALE)
    if "program" in data:
        data["program"] = {"id": entry.id, "name": entry.name, "type": entry.type.value}
    total = float((Decimal(entry.price) * _TAX).quantize(Decimal("0.01")))
    for part, amount in (("invoice", "total"), ("payment", "amount")):
        found = data.get(part)
        if isinstance(found, dict) and amount in found:
            found[amount] = total
    return data
