"""Programs synced from the platform, and the public listing built from them."""

from __future__ import annotations

from datetime import timedelta

import orjson
from sqlalchemy.orm import Session

from clubwire.domain import program_wire
from clubwire.services import programs
from tests.factories import EPOCH, make_club, make_program, program_data


def _data(**overrides: object) -> program_wire.ProgramData:
    return program_wire.ProgramData.model_validate(program_data(**overrides))


def _listing(session: Session, club_id: str) -> list[dict[str, object]]:
    body: list[dict[str, object]] = orjson.loads(programs.public_listing(session, club_id))["data"]
    return body


def test_put_program_reports_created_updated_unchanged(session: Session) -> None:
    club = make_club(session)
    upserts = [
        programs.put_program(session, club, "p1", _data(), EPOCH)[1],
        programs.put_program(session, club, "p1", _data(), EPOCH)[1],
        programs.put_program(session, club, "p1", _data(capacity=50), EPOCH)[1],
    ]
    assert upserts == ["created", "unchanged", "updated"]


def test_only_real_changes_bump_the_listing_version(session: Session) -> None:
    club = make_club(session)
    versions = [club.programs_version]
    for data in (_data(), _data(), _data(name="Renamed")):
        programs.put_program(session, club, "p1", data, EPOCH)
        versions.append(club.programs_version)
    programs.delete_program(session, club, "p1")
    versions.append(club.programs_version)
    programs.delete_program(session, club, "p1")
    versions.append(club.programs_version)
    assert versions == [0, 1, 1, 2, 3, 3]


def test_an_update_keeps_created_at_and_moves_updated_at(session: Session) -> None:
    club = make_club(session)
    programs.put_program(session, club, "p1", _data(), EPOCH)
    later = EPOCH + timedelta(hours=1)
    program, _ = programs.put_program(session, club, "p1", _data(capacity=9), later)
    assert (program.created_at, program.updated_at) == (EPOCH, later)


def test_platform_timestamps_are_kept(session: Session) -> None:
    club = make_club(session)
    program, _ = programs.put_program(
        session,
        club,
        "p1",
        _data(createdAt="2025-10-01T08:00:00+02:00", updatedAt="2025-10-02T08:00:00Z"),
        EPOCH,
    )
    session.commit()
    session.expire_all()
    assert _listing(session, club.id)[0]["createdAt"] == "2025-10-01T06:00:00.000Z"
    assert _listing(session, club.id)[0]["updatedAt"] == "2025-10-02T08:00:00.000Z"
    assert program.id == "p1"


def test_delete_reports_whether_there_was_one(session: Session) -> None:
    club = make_club(session)
    make_program(session, club, "p1")
    assert programs.delete_program(session, club, "p1") is True
    assert programs.delete_program(session, club, "p1") is False


def test_import_counts_each_outcome(session: Session) -> None:
    club = make_club(session)
    make_program(session, club, "p1")
    records = [
        program_wire.ProgramRecord.model_validate({"id": "p1", **program_data()}),
        program_wire.ProgramRecord.model_validate({"id": "p2", **program_data()}),
        program_wire.ProgramRecord.model_validate({"id": "p3", **program_data(name="x")}),
    ]
    counts = programs.import_programs(session, club, records, EPOCH)
    assert counts == {"created": 2, "unchanged": 1}


def test_listing_shows_active_public_programs_in_order(session: Session) -> None:
    club = make_club(session)
    make_program(
        session, club, "late", startDate="2026-02-01T00:00:00Z", endDate="2026-03-01T00:00:00Z"
    )
    make_program(session, club, "b", name="Bonspiel")
    make_program(session, club, "a2", name="Alpha")
    make_program(session, club, "a1", name="Alpha")
    make_program(session, club, "private", private=True)
    make_program(session, club, "draft", status="DRAFT")
    make_program(session, club, "done", status="COMPLETED")
    session.commit()
    assert [p["id"] for p in _listing(session, club.id)] == ["a1", "a2", "b", "late"]


def test_listing_of_one_club_never_shows_another_clubs_programs(session: Session) -> None:
    granite = make_club(session, "granite")
    marble = make_club(session, "marble")
    make_program(session, granite, "shared-id", name="Granite's")
    make_program(session, marble, "shared-id", name="Marble's")
    make_program(session, marble, "only-marble")
    session.commit()
    assert [p["name"] for p in _listing(session, granite.id)] == ["Granite's"]


def test_listing_body_has_the_wire_shape(session: Session) -> None:
    club = make_club(session)
    make_program(session, club, "p1", price="19.99", startDate="2026-01-13T13:30:00-05:00")
    session.commit()
    assert _listing(session, club.id) == [
        {
            "id": "p1",
            "name": "Tuesday Night League",
            "description": "Social league, two draws a night.",
            "type": "LEAGUE",
            "status": "ACTIVE",
            "startDate": "2026-01-13T18:30:00.000Z",
            "endDate": "2026-03-31T22:00:00.000Z",
            "price": 19.99,
            "capacity": 48,
            "createdAt": "2026-01-05T12:00:00.000Z",
            "updatedAt": "2026-01-05T12:00:00.000Z",
        }
    ]
