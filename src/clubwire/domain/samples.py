"""Realistic sample ``data`` for every event kind, from a curling club's people and programs.

Each public function takes ``(now, rng)`` and returns JSON-ready, camelCase ``data`` that
validates against its kind's model; ``events.sample`` picks the one of a kind.
"""

from __future__ import annotations

import random
import re
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import get_args

from clubwire.domain import base62, payloads, timestamps
from clubwire.domain.program_wire import ProgramType

_TAX = Decimal("1.13")  # Ontario HST
_CENT = Decimal("0.01")
_PEOPLE = (
    ("Marie-Ève Tremblay", "marie-eve.tremblay@example.com"),
    ("Liam MacDonald", "liam.macdonald@example.com"),
    ("Priya Sharma", "priya.sharma@example.com"),
    ("Jean-François Gagnon", "jf.gagnon@example.com"),
    ("Sarah Thompson", "sarah.thompson@example.com"),
    ("Noah Campbell", "noah.campbell@example.com"),
    ("Olivia Chen", "olivia.chen@example.com"),
    ("Ethan Robertson", "ethan.robertson@example.com"),
    ("Chloé Bouchard", "chloe.bouchard@example.com"),
    ("Mateo Kowalski", "mateo.kowalski@example.com"),
)
_PROGRAMS = (
    ("prg_tuesday_night_league", "Tuesday Night League", ProgramType.LEAGUE, "325.00"),
    ("prg_thursday_mixed_league", "Thursday Mixed League", ProgramType.LEAGUE, "295.00"),
    (
        "prg_learn_to_curl_winter",
        "Learn to Curl — Winter Session",
        ProgramType.LEARN_TO_CURL,
        "180.00",
    ),
    ("prg_mixed_doubles_bonspiel", "Mixed Doubles Bonspiel", ProgramType.BONSPIEL, "120.00"),
    ("prg_junior_skills_clinic", "Junior Skills Clinic", ProgramType.CLINIC, "0.00"),
    ("prg_friday_drop_in", "Friday Night Drop-In", ProgramType.DROP_IN, "15.00"),
)
_COMPETITIONS = tuple(p for p in _PROGRAMS if p[2] in (ProgramType.LEAGUE, ProgramType.BONSPIEL))
_TEAMS = (
    "Team Fleury", "Team Homan", "Team Jacobs", "Team Gushue",
    "Team Einarson", "Team Koe", "Team Dunstone", "Team Carey",
)  # fmt: skip
_SHEETS = tuple(f"Sheet {letter}" for letter in "ABCDEF")
_PAYMENT_ROUTES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("card_authorization", ("card",)),
    ("checkout", ("club_credit", "gift_card")),
    ("staff", ("cash", "cheque", "e_transfer", "other")),
)


def _token(rng: random.Random, prefix: str) -> str:
    return f"{prefix}_{''.join(rng.choices(base62.ALPHABET, k=12))}"


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


def _person(rng: random.Random) -> dict[str, object]:
    name, email = rng.choice(_PEOPLE)
    return {"id": f"mbr_{_slug(email.partition('@')[0])}", "name": name, "email": email}


def _program(entry: tuple[str, str, ProgramType, str]) -> dict[str, object]:
    return {"id": entry[0], "name": entry[1], "type": entry[2].value}


def _invoice_number(rng: random.Random, now: datetime) -> str:
    return f"INV-{now.year}-{rng.randint(1, 9999):05d}"


def registration(now: datetime, rng: random.Random) -> dict[str, object]:
    entry = rng.choice(_PROGRAMS)
    channel = rng.choice(get_args(payloads.EnrollmentChannel))
    total = (Decimal(entry[3]) * _TAX).quantize(_CENT)
    invoice = {
        "id": _token(rng, "inv"),
        "number": _invoice_number(rng, now),
        "total": float(total),
        "status": "open" if channel == "proxy" else "paid",
    }
    return {
        "enrollment": {
            "id": _token(rng, "enr"),
            "status": "active",
            "channel": channel,
            "createdAt": timestamps.to_wire(now),
        },
        "program": _program(entry),
        "member": _person(rng),
        "invoice": invoice if total else None,
    }


def payment(now: datetime, rng: random.Random) -> dict[str, object]:
    source, methods = rng.choice(_PAYMENT_ROUTES)
    price = Decimal(rng.choice([p for p in _PROGRAMS if p[3] != "0.00"])[3])
    return {
        "payment": {
            "id": _token(rng, "pay"),
            "amount": float((price * _TAX).quantize(_CENT)),
            "currency": "CAD",
            "method": rng.choice(methods),
            "source": source,
            "completedAt": timestamps.to_wire(now - timedelta(seconds=rng.randint(0, 5))),
        },
        "invoice": {"id": _token(rng, "inv"), "number": _invoice_number(rng, now)},
    }


def _sides(rng: random.Random, played: bool) -> list[dict[str, object]]:
    names = rng.sample(_TEAMS, 2)
    scores = [rng.randint(2, 10), rng.randint(2, 10)] if played else [None, None]
    sides: list[dict[str, object]] = []
    for name, score, other in zip(names, scores, reversed(scores), strict=True):
        result = None
        if score is not None and other is not None:
            result = "win" if score > other else "loss" if score < other else "tie"
        team = {"id": f"team_{_slug(name.split()[-1])}", "name": name}
        sides.append({"team": team, "score": score, "result": result})
    return sides


def game(now: datetime, rng: random.Random) -> dict[str, object]:
    reason = rng.choice(get_args(payloads.GameReason))
    played = reason == "result"
    quarter = now.replace(minute=now.minute - now.minute % 15, second=0, microsecond=0)
    starts = quarter - timedelta(hours=2) if played else quarter + timedelta(days=7)
    draw = rng.randint(1, 12)
    division = rng.choice(("A", "B", None))
    return {
        "game": {
            "id": _token(rng, "gm"),
            "sheet": rng.choice(_SHEETS),
            "scheduledAt": timestamps.to_wire(starts),
            "status": "final" if played else "scheduled",
        },
        "program": _program(rng.choice(_COMPETITIONS)),
        "division": division and {"id": f"div_{division.lower()}", "name": f"Division {division}"},
        "round": {"id": f"rnd_week_{draw}", "name": f"Week {draw}"},
        "draw": {
            "id": f"drw_{draw}",
            "name": f"Draw {draw}",
            "startsAt": timestamps.to_wire(starts),
        },
        "sides": _sides(rng, played),
        "reason": reason,
    }


def member(_now: datetime, rng: random.Random) -> dict[str, object]:
    change = rng.choice(get_args(payloads.MemberChange))
    status = rng.choice(("pending", "active") if change == "created" else ("active", "inactive"))
    return {"member": {**_person(rng), "status": status}, "change": change}


def practice_ice(now: datetime, rng: random.Random) -> dict[str, object]:
    day = (now + timedelta(days=rng.randint(1, 7))).date()
    start = datetime.combine(day, time(rng.choice((6, 7, 12, 13, 16, 20)), rng.choice((0, 30))))
    end = start + timedelta(minutes=rng.choice((60, 90)))
    return {
        "reservation": {
            "id": _token(rng, "res"),
            "sheet": rng.choice(_SHEETS),
            "date": day.isoformat(),
            "startTime": start.strftime("%H:%M"),
            "endTime": end.strftime("%H:%M"),
        },
        "booking": {
            "id": _token(rng, "bkg"),
            "bookedBy": rng.choice(get_args(payloads.BookedBy)),
            "createdAt": timestamps.to_wire(now),
        },
        "member": _person(rng),
    }


def ping(_now: datetime, _rng: random.Random) -> dict[str, object]:
    return {"message": "Test event from clubwire. If you can read this, your endpoint works."}
