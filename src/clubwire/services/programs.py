"""Programs synced from the platform, and the public listing the API serves."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import datetime
from enum import StrEnum

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from clubwire.domain import program_wire
from clubwire.storage import fastpath
from clubwire.storage.models import Club, Program


class Upserted(StrEnum):
    """What putting one program did."""

    CREATED = "created"
    UPDATED = "updated"
    UNCHANGED = "unchanged"


def put_program(
    session: Session, club: Club, program_id: str, data: program_wire.ProgramData, now: datetime
) -> tuple[Program, Upserted]:
    """Create or replace one program.

    A PUT that changes nothing writes nothing, so every API process keeps its cached listing.
    """
    fields = _fields(data)
    program = session.get(Program, (club.id, program_id))
    if program is None:
        program = Program(club_id=club.id, id=program_id, created_at=now, updated_at=now)
        session.add(program)
        upserted = Upserted.CREATED
    elif all(getattr(program, name) == value for name, value in fields.items()):
        return program, Upserted.UNCHANGED
    else:
        program.updated_at = now
        upserted = Upserted.UPDATED
    for name, value in fields.items():
        setattr(program, name, value)
    _bump_version(session, club)
    return program, upserted


def delete_program(session: Session, club: Club, program_id: str) -> bool:
    """Remove one program; returns whether there was one (deleting twice is fine)."""
    program = session.get(Program, (club.id, program_id))
    if program is None:
        return False
    session.delete(program)
    _bump_version(session, club)
    return True


def import_programs(
    session: Session, club: Club, records: Iterable[program_wire.ProgramRecord], now: datetime
) -> Counter[Upserted]:
    """Upsert every record; returns how many were created, updated and left unchanged."""
    return Counter(put_program(session, club, record.id, record, now)[1] for record in records)


def public_listing(session: Session, club_id: str) -> bytes:
    """The bytes of ``GET /api/v1/programs`` for the club."""
    rows = session.scalars(
        select(Program).where(
            Program.club_id == club_id,
            Program.status == program_wire.ProgramStatus.ACTIVE,
            Program.private.is_(False),
        )
    )
    return program_wire.listing_body(rows)


def _fields(data: program_wire.ProgramData) -> dict[str, object]:
    fields: dict[str, object] = {
        "name": data.name,
        "description": data.description,
        "type": data.type.value,
        "status": data.status.value,
        "start_date": data.start_date,
        "end_date": data.end_date,
        "price_cents": data.price_cents,
        "capacity": data.capacity,
        "private": data.private,
    }
    # Timestamps the platform supplies are kept; otherwise clubwire keeps its own.
    if data.created_at is not None:
        fields["created_at"] = data.created_at
    if data.updated_at is not None:
        fields["updated_at"] = data.updated_at
    return fields


def _bump_version(session: Session, club: Club) -> None:
    session.execute(
        update(Club)
        .where(Club.id == club.id)
        .values(programs_version=Club.programs_version + 1)
        .execution_options(synchronize_session=False)
    )
    session.refresh(club, ["programs_version"])
    fastpath.changes_api(session)
