"""An API process keeps at most ``CLUBWIRE_API_KEPT_LISTINGS`` clubs' program listings, the
most recently used: memory stays bounded at any number of clubs, and a listing forgotten is
built again, the same bytes, when its club comes back."""

from __future__ import annotations

import asyncio

from sqlalchemy.orm import Session, sessionmaker

from clubwire.services.club_api.api_access import ApiAccess, Caller
from clubwire.settings import Settings
from clubwire.storage import fastpath
from tests.factories import FakeClock, make_club, make_program


def test_past_the_bound_the_least_recently_listed_club_is_built_again(
    settings: Settings, sessions: sessionmaker[Session], clock: FakeClock
) -> None:
    with sessions.begin() as session:
        ids = []
        for slug in ("granite", "pebble", "hogline"):
            club = make_club(session, slug)
            make_program(session, club)
            ids.append(club.id)
    granite, pebble, hogline = (Caller(club_id, "key", "prefix", 1) for club_id in ids)

    async def run() -> tuple[list[bytes], list[str]]:
        reader = await fastpath.open_reader(settings.sqlalchemy_url, sessions, 10)
        access = ApiAccess(reader, sessions, clock, kept_listings=2, kept_keys=10)
        built: list[str] = []
        load = access._load_listing

        def counted(club_id: str) -> bytes:
            built.append(club_id)
            return load(club_id)

        access._load_listing = counted  # type: ignore[method-assign]
        try:
            bodies = []
            for caller in (granite, pebble, granite, hogline, granite, pebble):
                bodies.append(await access.programs_body(caller))
            return bodies, built
        finally:
            await access.close()

    bodies, built = asyncio.run(run())
    # granite stays (used most recently each time); pebble, the least recent, goes for hogline
    assert built == [ids[0], ids[1], ids[2], ids[1]]
    assert bodies[0] == bodies[2] == bodies[4]
    assert bodies[1] == bodies[5]
