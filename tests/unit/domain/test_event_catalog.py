"""Unit tests for the event catalog: payload models, the envelope bytes and samples."""

from __future__ import annotations

import copy
import pathlib
import random
import re
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import jsonschema_rs
import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import event_catalog
from clubwire.web.app import create_app
from tests.conftest import make_settings
from tests.json_paths import Path, delete_at, parse, paths, set_at, shown

NOW = datetime(2026, 1, 13, 18, 30, 12, 345_678, tzinfo=UTC)
WIRE_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def sampled(kind: str, seed: int = 7) -> dict[str, Any]:
    """A fresh sample of ``kind``, loosely typed for the tests to poke at."""
    data: dict[str, Any] = copy.deepcopy(event_catalog.sample(kind, NOW, random.Random(seed)))
    return data


def data_of(kind: str, **changes: object) -> dict[str, Any]:
    """A fresh sample of ``kind``; ``changes`` maps dotted paths (``member.email``) to values."""
    data = sampled(kind)
    for dotted, value in changes.items():
        set_at(data, parse(dotted), value)
    return data


def invalid(kind: str, data: object) -> event_catalog.InvalidData:
    with pytest.raises(event_catalog.InvalidData) as caught:
        event_catalog.validate(kind, data)
    return caught.value


def round_trip(kind: str, data: object) -> dict[str, Any]:
    body = event_catalog.envelope("evt_1", kind, NOW, "org_1", event_catalog.validate(kind, data))
    parsed: dict[str, Any] = orjson.loads(body)
    return parsed


# --------------------------------------------------------------------------- the catalog


def test_the_kinds_are_those_of_the_spec_and_ping_cannot_be_subscribed_to() -> None:
    assert event_catalog.KINDS == (
        "registration.created",
        "payment.completed",
        "game.updated",
        "member.updated",
        "practice_ice.booked",
        "ping",
    )
    assert "ping" not in event_catalog.SUBSCRIBABLE
    assert event_catalog.KINDS[:-1] == event_catalog.SUBSCRIBABLE


@pytest.mark.parametrize("call", [event_catalog.model_for, lambda k: event_catalog.validate(k, {})])
def test_an_unknown_kind_is_refused_naming_every_known_kind(call: Any) -> None:
    with pytest.raises(event_catalog.UnknownKind) as caught:
        call("registration.deleted")
    message = str(caught.value)
    assert "'registration.deleted'" in message
    assert all(kind in message for kind in event_catalog.KINDS)
    assert isinstance(caught.value, ValueError)


def test_sample_of_an_unknown_kind_is_refused() -> None:
    with pytest.raises(event_catalog.UnknownKind):
        event_catalog.sample("payment.refunded", NOW)


# --------------------------------------------------------------------------- samples


@pytest.mark.parametrize("kind", event_catalog.KINDS)
@pytest.mark.parametrize("seed", range(25))
def test_every_sample_validates_and_survives_the_envelope_unchanged(kind: str, seed: int) -> None:
    now = NOW + timedelta(hours=seed * 7, minutes=seed * 11)
    model = event_catalog.validate(kind, event_catalog.sample(kind, now, random.Random(seed)))
    parsed = orjson.loads(event_catalog.envelope("evt_1", kind, now, "org_1", model))
    assert event_catalog.validate(kind, parsed["data"]) == model


@pytest.mark.parametrize("kind", event_catalog.KINDS)
def test_a_sample_is_json_ready_and_its_own_wire_form(kind: str) -> None:
    data = event_catalog.sample(kind, NOW)
    assert orjson.loads(orjson.dumps(data)) == data
    assert round_trip(kind, data)["data"] == data


@pytest.mark.parametrize("kind", event_catalog.KINDS)
def test_a_sample_without_rng_depends_on_now_only(kind: str) -> None:
    assert event_catalog.sample(kind, NOW) == event_catalog.sample(kind, NOW)


@pytest.mark.parametrize("kind", event_catalog.SUBSCRIBABLE)
def test_samples_vary_so_a_demo_looks_alive(kind: str) -> None:
    samples = {
        orjson.dumps(event_catalog.sample(kind, NOW, random.Random(seed))) for seed in range(20)
    }
    assert len(samples) > 5


def test_samples_look_like_a_curling_club() -> None:
    games = [sampled("game.updated", seed) for seed in range(30)]
    assert {g["game"]["sheet"] for g in games} <= {f"Sheet {c}" for c in "ABCDEF"}
    assert all(g["draw"]["name"].startswith("Draw ") for g in games)
    assert all(s["team"]["name"].startswith("Team ") for g in games for s in g["sides"])
    assert {g["reason"] for g in games} == {"result", "placement"}
    payments = [sampled("payment.completed", seed) for seed in range(30)]
    assert {p["payment"]["currency"] for p in payments} == {"CAD"}
    members = [sampled("member.updated", seed) for seed in range(30)]
    assert all(m["member"]["email"].endswith("@example.com") for m in members)


def test_a_played_game_sample_has_consistent_results() -> None:
    for seed in range(40):
        game = sampled("game.updated", seed)
        first, second = game["sides"]
        if game["reason"] == "placement":
            assert first["score"] is first["result"] is second["score"] is second["result"] is None
            continue
        expected = {(True, False): "win", (False, True): "loss", (False, False): "tie"}
        assert (
            first["result"]
            == expected[first["score"] > second["score"], first["score"] < second["score"]]
        )


def test_a_payment_sample_pairs_its_method_with_a_plausible_source() -> None:
    methods = {"card_authorization": {"card"}, "checkout": {"club_credit", "gift_card"}}
    for seed in range(40):
        payment = sampled("payment.completed", seed)["payment"]
        assert payment["method"] in methods.get(
            payment["source"], {"cash", "cheque", "e_transfer", "other"}
        )


# --------------------------------------------------------------------------- unknown fields


@pytest.mark.parametrize("kind", event_catalog.KINDS)
def test_an_extra_field_is_refused_at_every_level_naming_its_path(kind: str) -> None:
    objects = [
        path for path, node in paths(event_catalog.sample(kind, NOW)) if isinstance(node, dict)
    ]
    assert objects
    for path in objects:
        data = data_of(kind)
        set_at(data, (*path, "notes"), "x")
        error = invalid(kind, data)
        assert str(error).startswith(f"{shown((*path, 'notes'))}: unknown field"), str(error)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("registration.created", "member.phone", "+1 613 555 0142"),
        ("registration.created", "member.dateOfBirth", "1990-04-01"),
        ("member.updated", "member.address", "12 Rideau St, Ottawa"),
        ("member.updated", "member.emergencyContact", {"name": "Pat", "phone": "555"}),
        ("practice_ice.booked", "member.phone", "613-555-0142"),
        ("payment.completed", "payment.cardNumber", "4242424242424242"),
    ],
)
def test_personal_data_cannot_leak_through_an_extra_field(
    kind: str, path: str, value: object
) -> None:
    error = invalid(kind, data_of(kind, **{path: value}))
    assert str(error) == f"data.{path}: unknown field (payloads accept only documented fields)"
    assert error.path == f"data.{path}"


def test_snake_case_names_are_accepted_and_written_back_in_camel_case() -> None:
    data = data_of("practice_ice.booked")
    reservation = data["reservation"]
    reservation["start_time"] = reservation.pop("startTime")
    reservation["end_time"] = reservation.pop("endTime")
    assert round_trip("practice_ice.booked", data)["data"] == data_of("practice_ice.booked")


# --------------------------------------------------------------------------- field rules


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("registration.created", "enrollment.channel", "kiosk"),
        ("registration.created", "enrollment.status", "deleted"),
        ("registration.created", "invoice.status", "unpaid"),
        ("registration.created", "program.type", "league"),
        ("payment.completed", "payment.method", "bitcoin"),
        ("payment.completed", "payment.source", "refund"),
        ("game.updated", "game.status", "done"),
        ("game.updated", "sides.0.result", "draw"),
        ("game.updated", "reason", "moved"),
        ("member.updated", "member.status", "banned"),
        ("member.updated", "change", "deleted"),
        ("practice_ice.booked", "booking.bookedBy", "coach"),
    ],
)
def test_a_value_outside_its_set_is_refused(kind: str, path: str, value: str) -> None:
    data = data_of(kind, **{path: value})
    if kind == "registration.created" and data["invoice"] is None:
        pytest.skip("this sample has no invoice")
    error = invalid(kind, data)
    assert error.path == shown(parse(path))
    assert str(error).startswith(f"{shown(parse(path))}: input should be ")


@pytest.mark.parametrize(
    ("kind", "path"),
    [
        ("registration.created", "enrollment.createdAt"),
        ("payment.completed", "payment.completedAt"),
        ("game.updated", "game.scheduledAt"),
        ("game.updated", "draw.startsAt"),
        ("practice_ice.booked", "booking.createdAt"),
    ],
)
@pytest.mark.parametrize(
    "value",
    [
        pytest.param("2026-01-13T18:30:00", id="naive-text"),
        pytest.param(datetime(2026, 1, 13, 18, 30), id="naive-datetime"),
        pytest.param(1768329000, id="unix-number"),
        pytest.param("1768329000", id="unix-text"),
        pytest.param("2026-01-13", id="date-only"),
        pytest.param("1850-01-13T18:30:00Z", id="implausible-year"),
        pytest.param("tomorrow", id="words"),
    ],
)
def test_a_timestamp_must_be_aware_and_iso(kind: str, path: str, value: object) -> None:
    assert invalid(kind, data_of(kind, **{path: value})).path == shown(parse(path))


def test_aware_timestamps_in_any_offset_are_written_in_utc_with_milliseconds() -> None:
    eastern = timezone(timedelta(hours=-5))
    data = data_of(
        "payment.completed", **{"payment.completedAt": "2026-01-13T13:30:00.123456-05:00"}
    )
    assert (
        round_trip("payment.completed", data)["data"]["payment"]["completedAt"]
        == "2026-01-13T18:30:00.123Z"
    )
    data["payment"]["completedAt"] = datetime(2026, 1, 13, 13, 30, tzinfo=eastern)
    assert (
        round_trip("payment.completed", data)["data"]["payment"]["completedAt"]
        == "2026-01-13T18:30:00.000Z"
    )


@pytest.mark.parametrize(
    "email",
    [
        "",
        "marie.tremblay",
        "marie@localhost",
        "marie tremblay@example.com",
        "marie@@example.com",
        "marie@example..com",
        "@example.com",
        "marie@example.com\n",
        "m" * 250 + "@example.com",
    ],
)
def test_a_bad_email_is_refused(email: str) -> None:
    error = invalid(
        "registration.created", data_of("registration.created", **{"member.email": email})
    )
    assert str(error) == "data.member.email: value is not a valid email address"


@pytest.mark.parametrize("email", ["o'brien+curling@mail.example.ca", "jf.gagnon@example.com"])
def test_an_ordinary_email_is_accepted(email: str) -> None:
    event_catalog.validate("member.updated", data_of("member.updated", **{"member.email": email}))


@pytest.mark.parametrize(
    ("start", "end"), [("19:00", "18:00"), ("19:00", "19:00"), ("23:30", "00:30")]
)
def test_practice_ice_must_end_after_it_starts(start: str, end: str) -> None:
    data = data_of(
        "practice_ice.booked", **{"reservation.startTime": start, "reservation.endTime": end}
    )
    assert (
        str(invalid("practice_ice.booked", data))
        == "data.reservation.endTime: must be after startTime"
    )


@pytest.mark.parametrize("value", ["24:00", "7:00", "18:60", "18:30:00", "6pm", 1830])
def test_a_clock_time_is_hh_mm(value: object) -> None:
    data = data_of("practice_ice.booked", **{"reservation.startTime": value})
    assert invalid("practice_ice.booked", data).path == "data.reservation.startTime"


@pytest.mark.parametrize(
    "value", ["2026-02-30", "2026-1-5", "Jan 17", 20260117, "2026-01-17T00:00:00Z"]
)
def test_a_reservation_date_is_yyyy_mm_dd(value: object) -> None:
    data = data_of("practice_ice.booked", **{"reservation.date": value})
    assert invalid("practice_ice.booked", data).path == "data.reservation.date"


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("payment.amount", 42.555),
        ("payment.amount", -1),
        ("payment.amount", "NaN"),
        ("payment.amount", float("inf")),
        ("payment.amount", 10**12),
        ("payment.currency", "cad"),
        ("payment.currency", "CA"),
        ("payment.id", ""),
        ("payment.id", "p" * 129),
        ("payment.id", "pay 1"),
        ("invoice.number", ""),
    ],
)
def test_payment_fields_are_checked(path: str, value: object) -> None:
    data = data_of("payment.completed", **{path: value})
    assert invalid("payment.completed", data).path == shown(parse(path))


@pytest.mark.parametrize(
    ("amount", "wire"),
    [(Decimal("42.50"), b'"amount":42.5,'), (0.1, b'"amount":0.1,'), (367, b'"amount":367.0,')],
)
def test_amounts_are_written_as_json_numbers(amount: object, wire: bytes) -> None:
    model = event_catalog.validate(
        "payment.completed", data_of("payment.completed", **{"payment.amount": amount})
    )
    assert wire in event_catalog.envelope("evt_1", "payment.completed", NOW, "org_1", model)


def test_a_game_needs_two_sides_or_more() -> None:
    data = data_of("game.updated")
    data["sides"] = data["sides"][:1]
    assert invalid("game.updated", data).path == "data.sides"
    data["sides"] = [*data_of("game.updated")["sides"], data_of("game.updated")["sides"][0]]
    event_catalog.validate("game.updated", data)


@pytest.mark.parametrize("path", ["division", "round", "draw", "sides.0.score", "sides.1.result"])
def test_nullable_parts_may_be_null_or_left_out_and_are_written_as_null(path: str) -> None:
    nulled = data_of("game.updated", **{path: None})
    omitted = data_of("game.updated")
    delete_at(omitted, parse(path))
    assert round_trip("game.updated", nulled)["data"] == round_trip("game.updated", omitted)["data"]
    written: Any = round_trip("game.updated", omitted)["data"]
    for part in parse(path):
        written = written[part]
    assert written is None


def test_an_invoice_may_be_null() -> None:
    data = data_of("registration.created", invoice=None)
    assert round_trip("registration.created", data)["data"]["invoice"] is None


@pytest.mark.parametrize("kind", event_catalog.KINDS)
def test_a_missing_field_is_named(kind: str) -> None:
    data = data_of(kind)
    first = next(iter(data))
    del data[first]
    assert str(invalid(kind, data)).startswith(f"data.{first}: field required")


@pytest.mark.parametrize("data", [None, [], "text", 3, {"message": ""}])
def test_a_payload_that_is_not_an_object_is_refused_on_one_line(data: object) -> None:
    error = invalid("ping", data)
    assert "\n" not in str(error)
    assert str(error).startswith("data")


def test_several_problems_are_counted_after_the_first() -> None:
    error = invalid("ping", {"message": "hi", "a": 1, "b": 2})
    assert (
        str(error)
        == "data.a: unknown field (payloads accept only documented fields) (and 1 more problem)"
    )


# --------------------------------------------------------------------------- the envelope


def test_the_envelope_is_exact_compact_json_in_field_order() -> None:
    model = event_catalog.validate("ping", {"message": "Hello from the rink"})
    body = event_catalog.envelope(
        "evt_2Rk8fV1nQ7xLm3Pz9WcT", "ping", NOW, "org_3kT9wQ2mZx7LpR4vN8cY", model
    )
    assert body == (
        b'{"id":"evt_2Rk8fV1nQ7xLm3Pz9WcT","event":"ping","createdAt":"2026-01-13T18:30:12.345Z",'
        b'"organizationId":"org_3kT9wQ2mZx7LpR4vN8cY","data":{"message":"Hello from the rink"}}'
    )


@pytest.mark.parametrize("kind", event_catalog.KINDS)
def test_every_envelope_has_the_five_fields_and_wire_timestamps(kind: str) -> None:
    parsed = round_trip(kind, event_catalog.sample(kind, NOW))
    assert list(parsed) == ["id", "event", "createdAt", "organizationId", "data"]
    assert parsed["event"] == kind
    assert parsed["createdAt"] == "2026-01-13T18:30:12.345Z"
    stamps = [value for path, value in paths(parsed) if path and str(path[-1]).endswith("At")]
    assert len(stamps) >= 1 if kind in ("member.updated", "ping") else len(stamps) >= 2
    assert all(isinstance(v, str) and WIRE_TIMESTAMP.fullmatch(v) for v in stamps)


def test_the_event_id_is_read_back_from_the_envelope_bytes() -> None:
    model = event_catalog.validate("ping", {"message": "Hello"})
    assert event_catalog.id_of(
        event_catalog.envelope("evt_2Rk8fV1nQ7", "ping", NOW, "org_1", model)
    ) == ("evt_2Rk8fV1nQ7")
    assert event_catalog.id_of(b'{"event":"ping"}') is None
    assert event_catalog.id_of(b'{"id":"evt_cut') is None


def test_the_envelope_refuses_data_of_another_kind() -> None:
    model = event_catalog.validate("ping", {"message": "hi"})
    with pytest.raises(TypeError, match="PaymentCompletedData"):
        event_catalog.envelope("evt_1", "payment.completed", NOW, "org_1", model)


def test_the_envelope_refuses_a_naive_time_and_an_unknown_kind() -> None:
    model = event_catalog.validate("ping", {"message": "hi"})
    with pytest.raises(ValueError, match="timezone-aware"):
        event_catalog.envelope("evt_1", "ping", datetime(2026, 1, 13), "org_1", model)
    with pytest.raises(event_catalog.UnknownKind):
        event_catalog.envelope("evt_1", "pong", NOW, "org_1", model)


# --------------------------------------------------------------------------- fuzzing


def outcome(kind: str, data: object) -> str | None:
    """None when ``data`` is valid, else the ``InvalidData`` message; anything else propagates."""
    try:
        event_catalog.validate(kind, data)
    except event_catalog.InvalidData as error:
        return str(error)
    return None


def assert_one_line_or_valid(message: str | None) -> None:
    if message is not None:
        assert "\n" not in message
        assert re.match(r"data[.\[:]", message), message


json_values: st.SearchStrategy[object] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.mark.parametrize("kind", event_catalog.KINDS)
@given(data=json_values)
def test_validate_raises_only_invalid_data_for_arbitrary_json(kind: str, data: object) -> None:
    assert_one_line_or_valid(outcome(kind, data))


@pytest.mark.parametrize("kind", event_catalog.KINDS)
@given(choice=st.data(), value=json_values)
def test_validate_raises_only_invalid_data_for_damaged_samples(
    kind: str, choice: st.DataObject, value: object
) -> None:
    data = data_of(kind)
    path = choice.draw(st.sampled_from([p for p, _ in paths(data) if p]))
    set_at(data, path, value)
    assert_one_line_or_valid(outcome(kind, data))


# --------------------------------------------------------------------------- JSON types


def _publish_schema() -> jsonschema_rs.Validator:
    """The publish body as the service's OpenAPI document describes it (what Schemathesis
    and the platform's developers read), formats checked."""
    settings = make_settings("sqlite:///unused.db", pathlib.Path("."))
    schemas = create_app(settings).openapi()["components"]["schemas"]
    root = {"$ref": "#/components/schemas/EventIn", "components": {"schemas": schemas}}
    return jsonschema_rs.validator_for(root, validate_formats=True)


PUBLISHED = _publish_schema()
JSON_VALUES = [True, False, 0, 7, 7.0, 7.5, -1, 0.07, 1e-9, "7", "7.5", "", "text", None, [], {}]
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=5,
)


def _agrees_with_its_schema(kind: str, path: Path, value: object) -> None:
    """``value`` at ``path`` of a sample is refused, naming that path, exactly when the
    published schema says it is not valid."""
    data = sampled(kind)
    set_at(data, path, value)
    documented = PUBLISHED.is_valid({"event": kind, "data": data})
    refused: event_catalog.InvalidData | None = None
    try:
        event_catalog.validate(kind, data)
    except event_catalog.InvalidData as error:
        refused = error
    where = f"{shown(path)} = {value!r}"
    assert (refused is None) == documented, f"{where}: documented {documented}, {refused}"
    assert refused is None or refused.path.startswith(shown(path)), str(refused)


def _fields(kind: str) -> list[Path]:
    return [path for path, _ in paths(sampled(kind)) if path]


@pytest.mark.parametrize("kind", event_catalog.SUBSCRIBABLE)
def test_every_field_takes_the_json_types_its_schema_says_and_no_other(kind: str) -> None:
    """No boolean or text for a number, no number for text, no fraction for an integer."""
    for path in _fields(kind):
        for value in JSON_VALUES:
            _agrees_with_its_schema(kind, path, value)


@pytest.mark.parametrize("kind", event_catalog.SUBSCRIBABLE)
@given(data=st.data())
def test_any_json_value_anywhere_is_taken_exactly_when_documented(
    kind: str, data: st.DataObject
) -> None:
    path = data.draw(st.sampled_from(_fields(kind)))
    _agrees_with_its_schema(kind, path, data.draw(JSON))


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("game.updated", "sides.0.score", False),
        ("game.updated", "sides.0.score", True),
        ("game.updated", "sides.1.score", "3"),
        ("game.updated", "sides.1.score", 3.5),
        ("payment.completed", "payment.amount", "367.25"),
        ("payment.completed", "payment.amount", True),
        ("registration.created", "invoice.total", "0"),
        ("member.updated", "member.name", 7),
        ("ping", "message", False),
    ],
)
def test_a_value_of_the_wrong_json_type_is_refused_naming_its_field(
    kind: str, path: str, value: object
) -> None:
    data = data_of(kind, **{path: value})
    assert invalid(kind, data).path == shown(parse(path))


@pytest.mark.parametrize(("score", "kept"), [(0, 0), (7, 7), (7.0, 7), (None, None)])
def test_a_score_is_a_whole_json_number_or_null(score: object, kept: object) -> None:
    data = data_of("game.updated", **{"sides.0.score": score})
    assert round_trip("game.updated", data)["data"]["sides"][0]["score"] == kept


@pytest.mark.parametrize("kind", event_catalog.KINDS)
def test_every_sample_is_valid_by_the_published_schema(kind: str) -> None:
    for seed in range(20):
        data = sampled(kind, seed)
        event_catalog.validate(kind, data)
        if kind in event_catalog.SUBSCRIBABLE:
            assert PUBLISHED.is_valid({"event": kind, "data": data})
