"""``clubwire event publish-batch``: a file of events (a JSON array) published together, all
or none; a file refused in one line that names the event, and nothing written."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, func, select

from clubwire.domain import event_catalog
from clubwire.storage.models import Delivery, Event
from tests.factories import EPOCH, about, registration
from tests.functional.cli_runner import Invoke, ok, one_line_error

KINDS = ("registration.created", "payment.completed")


@pytest.fixture
def club(run: Invoke) -> str:
    """Granite, its module on, with an endpoint for registrations and one for both kinds."""
    ok(run("club", "create", "granite", "--name", "Granite"))
    ok(run("club", "module", "granite", "on"))
    for kinds in (KINDS[:1], KINDS):
        flags = [flag for kind in kinds for flag in ("--event", kind)]
        ok(run("endpoint", "create", "granite", "https://hooks.example.org/in", *flags))
    return "granite"


def _events(count: int) -> list[dict[str, Any]]:
    rng = random.Random(count)
    kinds = (KINDS[n % len(KINDS)] for n in range(count))
    return [{"event": kind, "data": event_catalog.sample(kind, EPOCH, rng)} for kind in kinds]


def _counts(database_url: str) -> tuple[int, int]:
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            count = select(func.count())
            return (
                connection.scalar(count.select_from(Event)) or 0,
                connection.scalar(count.select_from(Delivery)) or 0,
            )
    finally:
        engine.dispose()


def test_a_file_of_100_events_is_published_with_each_events_deliveries(
    run: Invoke, club: str, tmp_path: Path, database_url: str
) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps(_events(100)))
    ids = ok(run("event", "publish-batch", club, str(path))).out.split()
    assert len(set(ids)) == 100
    assert all(i.startswith("evt_") for i in ids)
    # Registrations go to both endpoints, payments to one.
    assert _counts(database_url) == (100, 50 * 2 + 50)


def test_stdin_and_json_give_repeated_keys_their_earlier_ids(run: Invoke, club: str) -> None:
    keyed = [{**e, "idempotencyKey": f"order-{n}"} for n, e in enumerate(_events(2))]
    first = json.loads(
        ok(run("event", "publish-batch", club, "-", "--json", stdin=json.dumps(keyed).encode())).out
    )
    again = json.loads(
        ok(run("event", "publish-batch", club, "-", "--json", stdin=json.dumps(keyed).encode())).out
    )
    assert [e["repeated"] for e in first["events"]] == [False, False]
    assert again["events"] == [{**e, "repeated": True} for e in first["events"]]


def _hostile(tmp_path: Path) -> list[tuple[bytes, str]]:
    """Files and the words their one line must hold."""
    good = json.dumps(_events(2))
    bad_data = json.dumps([*_events(2), {"event": "member.updated", "data": {"member": {}}}])
    return [
        (b"\xff\xfe[]", "is not JSON"),
        (b"[{'event': 1}]", "is not JSON"),
        (b"[\x00]", "is not JSON"),
        (good.encode()[:-1], "is not JSON"),
        (b"{}", "must hold a JSON array"),
        (b"[]", "holds 0 events"),
        (json.dumps(_events(101)).encode(), "holds 101 events"),
        (b'[{"event": "registration.created", "data": {}}, 3]', "event 2: item:"),
        (b'[{"data": {}}]', "event 1: event:"),
        (bad_data.encode(), "event 3: data."),
        (json.dumps([{"event": "ping", "data": {}}]).encode(), "event 1: ping"),
        (
            json.dumps(
                [{"event": "registration.created", "data": registration(), "x": 1}]
            ).encode(),
            "event 1: x:",
        ),
        (
            json.dumps(
                [
                    {
                        "event": "registration.created",
                        "data": about("registration.created", name="A\0"),
                    }
                ]
            ).encode(),
            "event 1: data.member.name",
        ),
        (
            json.dumps(
                [{"event": "registration.created", "data": registration(), "idempotencyKey": "\0"}]
            ).encode(),
            "event 1: idempotencyKey:",
        ),
        (b"[" + b" " * (2 * 1024 * 1024) + b"]", "is larger than"),
    ]


def test_a_hostile_file_is_refused_in_one_line_naming_the_event_and_writes_nothing(
    run: Invoke, club: str, tmp_path: Path, database_url: str
) -> None:
    path = tmp_path / "events.json"
    for content, words in _hostile(tmp_path):
        path.write_bytes(content)
        line = one_line_error(run("event", "publish-batch", club, str(path)))
        assert words in line, (content[:80], line)
        assert "\x00" not in line
    assert _counts(database_url) == (0, 0)


def test_a_key_reused_for_other_data_names_the_event_and_writes_nothing(
    run: Invoke, club: str, tmp_path: Path, database_url: str
) -> None:
    one, other = ({**e, "idempotencyKey": "order-1"} for e in _events(2))
    path = tmp_path / "events.json"
    path.write_text(json.dumps([one, other]))
    line = one_line_error(run("event", "publish-batch", club, str(path)))
    assert f"{path}: event 2: The idempotency key was first used earlier in this batch" in line
    piped = one_line_error(run("event", "publish-batch", club, "-", stdin=path.read_bytes()))
    assert "<stdin>: event 2: The idempotency key" in piped
    assert _counts(database_url) == (0, 0)


def test_a_file_for_an_unknown_club_is_refused(run: Invoke, tmp_path: Path) -> None:
    path = tmp_path / "events.json"
    path.write_text(json.dumps(_events(1)))
    assert "granite" in one_line_error(run("event", "publish-batch", "granite", str(path)))
