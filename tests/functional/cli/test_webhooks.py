"""``clubwire endpoint``, ``event`` and ``delivery`` as a club's developer would use them (and
``user create``). Clubs, programs, keys and ``serve``: ``test_club_data.py``."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire import signing
from clubwire.domain import event_catalog, timestamps
from clubwire.settings import Settings
from tests.factories import receiver_settings, registration
from tests.functional.cli_runner import Invoke, Result, ok, one_line_error
from tests.functional.workers import attempt_once
from tests.receiver import Authority, Receiver, serving


@pytest.fixture
def club(run: Invoke, monkeypatch: pytest.MonkeyPatch, tls: Authority) -> str:
    monkeypatch.setenv("CLUBWIRE_ALLOW_PRIVATE_TARGETS", "true")
    monkeypatch.setenv("CLUBWIRE_CA_BUNDLE", str(tls.bundle))
    ok(run("club", "create", "granite", "--name", "Granite"))
    ok(run("club", "module", "granite", "on"))
    return "granite"


def _create(run: Invoke, url: str, *kinds: str) -> dict[str, object]:
    flags = [flag for kind in kinds or ("registration.created",) for flag in ("--event", kind)]
    created: dict[str, object] = json.loads(
        ok(run("endpoint", "create", "granite", url, *flags, "--json")).out
    )
    return created


def test_endpoint_create_prints_id_and_secret_once(
    run: Invoke, club: str, receiver: Receiver
) -> None:
    plain = ok(run("endpoint", "create", club, receiver.url, "--event", "member.updated"))
    endpoint_id, secret = plain.out.split()
    assert endpoint_id.startswith("we_")
    assert secret.startswith("whsec_")
    assert "shown once" in plain.err
    created = _create(run, receiver.url, "registration.created", "game.updated")
    assert set(created) >= {"id", "secret", "url", "events", "enabled", "deadInARow"}
    listed = json.loads(ok(run("endpoint", "list", club, "--json")).out)
    assert [e["id"] for e in listed] == [endpoint_id, created["id"]]
    assert set(listed[0]) >= {
        "id",
        "url",
        "events",
        "enabled",
        "deadInARow",
        "lastDeliveryAt",
        "lastResponseCode",
        "disabledReason",
    }
    assert secret not in json.dumps(listed)
    assert "0 of 5" in ok(run("endpoint", "list", club)).out


@pytest.mark.parametrize(
    ("url", "flags", "needle"),
    [
        ("http://hooks.example/x", ("--event", "member.updated"), "https"),
        ("https://hooks.example/x", ("--event", "ping"), "ping cannot"),
        ("https://hooks.example/x", ("--event", "nope"), "Unknown event"),
        ("https://hooks.example/x", (), "at least one"),
        ("https://u:p@hooks.example/x", ("--event", "member.updated"), "user"),
    ],
)
def test_endpoint_create_refuses_bad_input_in_one_line(
    run: Invoke, club: str, url: str, flags: tuple[str, ...], needle: str
) -> None:
    assert needle in one_line_error(run("endpoint", "create", club, url, *flags))
    assert json.loads(ok(run("endpoint", "list", club, "--json")).out) == []


def test_a_literal_private_address_is_refused_without_the_setting(
    run: Invoke, club: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUBWIRE_ALLOW_PRIVATE_TARGETS", "false")
    line = one_line_error(
        run("endpoint", "create", club, "https://0x7f000001/x", "--event", "member.updated")
    )
    assert "127.0.0.1" in line


def test_update_disable_enable_rotate_delete(run: Invoke, club: str, receiver: Receiver) -> None:
    endpoint_id = str(_create(run, receiver.url)["id"])
    updated = json.loads(
        ok(run("endpoint", "update", endpoint_id, "--event", "game.updated", "--json")).out
    )
    assert updated["events"] == ["game.updated"]
    disabled = json.loads(ok(run("endpoint", "disable", endpoint_id, "--json")).out)
    assert (disabled["enabled"], disabled["disabledReason"]) == (False, "superadmin")
    [listed] = json.loads(ok(run("endpoint", "list", club, "--json")).out)
    assert listed["disabledReason"] == "superadmin"
    row = re.compile(rf"^{endpoint_id}\s.*\soff\s.*\sSwitched off by a superadmin$", re.MULTILINE)
    assert row.search(ok(run("endpoint", "list", club)).out)
    enabled = json.loads(
        ok(run("endpoint", "enable", endpoint_id, "--resend-skipped", "--json")).out
    )
    assert (enabled["enabled"], enabled["resent"], enabled["disabledReason"]) == (True, 0, None)
    assert re.search(
        rf"^{endpoint_id}\s.*\son\s.*\s-$", ok(run("endpoint", "list", club)).out, re.M
    )
    rotated = json.loads(ok(run("endpoint", "rotate-secret", endpoint_id, "--json")).out)
    assert rotated["secret"].startswith("whsec_")
    assert ok(run("endpoint", "delete", endpoint_id)).out.strip() == f"Deleted {endpoint_id}."
    assert "no webhook endpoint" in one_line_error(run("endpoint", "delete", endpoint_id))


def _max_rate(run: Invoke, *args: str) -> object:
    """The ``maxRate`` an ``endpoint`` command prints as JSON."""
    return json.loads(ok(run("endpoint", *args, "--json")).out)["maxRate"]


def test_max_rate_is_set_listed_changed_kept_and_cleared(run: Invoke, club: str) -> None:
    created = _create_with(run, club, "--max-rate", "20")
    endpoint_id = str(created["id"])
    assert created["maxRate"] == 20
    row = re.compile(rf"^{endpoint_id}\s.*\son\s+(\S+)\s+any\s+0 of 5", re.MULTILINE)
    assert row.findall(ok(run("endpoint", "list", club)).out) == ["20/s"]
    assert _max_rate(run, "update", endpoint_id, "--max-rate", "1000") == 1000
    assert _max_rate(run, "update", endpoint_id, "--event", "game.updated") == 1000
    assert _max_rate(run, "update", endpoint_id, "--max-rate", "none") is None
    assert row.findall(ok(run("endpoint", "list", club)).out) == ["none"]
    assert json.loads(ok(run("endpoint", "list", club, "--json")).out)[0]["maxRate"] is None
    assert _create_with(run, club)["maxRate"] is None


def _usage_errors(run: Invoke, club: str, endpoint_id: str, *flags: str) -> list[str]:
    """The one line ``endpoint create``, then ``endpoint update``, refuse ``flags`` with."""
    return [
        one_line_error(run("endpoint", *command, *flags), code=2)
        for command in (
            ("create", club, "https://127.0.0.1:9/other", "--event", "member.updated"),
            ("update", endpoint_id, "--url", "https://127.0.0.1:9/other"),
        )
    ]


def _create_with(run: Invoke, club: str, *flags: str) -> dict[str, object]:
    url, kind = "https://127.0.0.1:9/hooks", "member.updated"
    created: dict[str, object] = json.loads(
        ok(run("endpoint", "create", club, url, "--event", kind, *flags, "--json")).out
    )
    return created


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("0", '"0" is not a max rate: the lowest is 1 delivery per second.'),
        ("-1", '"-1" is not a max rate: the lowest is 1 delivery per second.'),
        ("1001", '"1001" is not a max rate: the highest is 1000 deliveries per second.'),
        ("9" * 5000, '"9999999999999999999…" is not a max rate: the highest is 1000'),
        ("1e9", '"1e9" is not a max rate: write a whole number of deliveries per second'),
        ("５", '"５" is not a max rate: write a whole number'),
        (" 5 ", '" 5 " is not a max rate: remove the spaces around the number.'),
        ("None", '"None" is not a max rate'),
    ],
)
def test_a_bad_max_rate_is_refused_in_one_line_and_changes_nothing(
    run: Invoke, club: str, value: str, needle: str
) -> None:
    endpoint_id = str(_create_with(run, club, "--max-rate", "7")["id"])
    lines = _usage_errors(run, club, endpoint_id, "--max-rate", value)
    for line, command in zip(lines, ("create", "update"), strict=True):
        assert f"Invalid value for '--max-rate': {needle}" in line
        assert line.endswith(f"(see: clubwire endpoint {command} --help)")
    [endpoint] = json.loads(ok(run("endpoint", "list", club, "--json")).out)
    assert (endpoint["url"], endpoint["maxRate"]) == ("https://127.0.0.1:9/hooks", 7)


def test_a_max_rate_holding_nul_is_refused_before_anything_runs(run: Invoke, club: str) -> None:
    endpoint_id = str(_create_with(run, club)["id"])
    line = one_line_error(run("endpoint", "update", endpoint_id, "--max-rate", "5\x00"))
    assert (
        line == 'clubwire: error: the argument "5\\x00" must not contain NUL characters (\\u0000)'
    )


def test_endpoint_test_prints_the_outcome(
    run: Invoke, club: str, receiver: Receiver, tls: Authority
) -> None:
    created = _create(run, receiver.url)
    result = ok(run("endpoint", "test", str(created["id"])))
    assert result.out.startswith("200 in ")
    (request,) = receiver.wait_for(1)
    signing.verify(request.body, request.headers["X-Service-Signature"], str(created["secret"]))
    with serving(tls, status=500) as failing:
        broken = _create(run, failing.url)
        outcome = run("endpoint", "test", str(broken["id"]), "--json")
    assert outcome.code == 1
    assert json.loads(outcome.out)["responseCode"] == 500


def test_endpoint_test_answered_410_says_so_and_switches_nothing_off(
    run: Invoke, club: str, tls: Authority
) -> None:
    with serving(tls, status=410) as gone:
        endpoint_id = str(_create(run, gone.url)["id"])
        outcome = run("endpoint", "test", endpoint_id)
    assert outcome.code == 1
    assert outcome.out.startswith("failed: the receiver answered 410 Gone: it wants no more ")
    assert "a test switches nothing off (after " in outcome.out
    [listed] = json.loads(ok(run("endpoint", "list", club, "--json")).out)
    assert (listed["enabled"], listed["disabledReason"], listed["deadInARow"]) == (True, None, 0)


def test_delivery_show_lists_every_attempt(run: Invoke, club: str, tls: Authority) -> None:
    with serving(tls, status=500) as failing:
        endpoint_id = str(_create(run, failing.url)["id"])
        tested = json.loads(run("endpoint", "test", endpoint_id, "--json").out)
    delivery_id = tested["deliveryId"]
    shown = json.loads(ok(run("delivery", "show", delivery_id, "--json")).out)
    assert (shown["id"], shown["endpointId"], shown["event"]) == (delivery_id, endpoint_id, "ping")
    [attempt] = shown["attempts"]
    assert (attempt["number"], attempt["trigger"], attempt["responseCode"]) == (1, "test", 500)
    assert attempt["excerpt"] == "answered 500"
    assert attempt["startedAt"] == tested["startedAt"]
    table = ok(run("delivery", "show", delivery_id)).out
    assert f"Delivery     {delivery_id}" in table
    assert re.search(r"^1\s+test\s+\S+Z\s+\d+\s+500\s+-\s+-\s+answered 500$", table, re.M)
    assert "no delivery" in one_line_error(run("delivery", "show", "dlv_nope"))


def test_delivery_show_says_when_the_receiver_asked_to_wait(
    run: Invoke, club: str, tls: Authority, sessions: sessionmaker[Session], settings: Settings
) -> None:
    hooks = receiver_settings(settings, ca_bundle=tls.bundle)
    asking = [("Retry-After", "3600")]
    with serving(tls, status=503, answer_headers=asking) as failing:
        _create(run, failing.url)
        ok(run("trigger", club, "registration.created"))
        now = timestamps.utc_now() + timedelta(seconds=1)
        attempt_once(sessions, hooks, now)
    (listed,) = json.loads(ok(run("delivery", "list", club, "--json")).out)
    shown = json.loads(ok(run("delivery", "show", listed["id"], "--json")).out)
    asked = timestamps.to_wire(now + timedelta(hours=1))
    assert (shown["nextAttemptAt"], shown["nextAttemptAsked"]) == (asked, True)
    assert listed["nextAttemptAsked"] is True
    [attempt] = shown["attempts"]
    assert (attempt["responseCode"], attempt["retryAfter"]) == (503, "3600")
    table = ok(run("delivery", "show", listed["id"])).out
    assert f"Next attempt the receiver asked to wait until {asked}\n" in table
    assert re.search(r"^1\s+scheduled\s+\S+Z\s+\d+\s+503\s+-\s+3600\s+answered 503$", table, re.M)


def test_event_publish_and_delivery_list_and_retry(
    run: Invoke, club: str, receiver: Receiver, tmp_path: Path
) -> None:
    endpoint_id = str(_create(run, receiver.url)["id"])
    data = tmp_path / "data.json"
    data.write_text(json.dumps(registration()))
    event_id = ok(
        run("event", "publish", club, "registration.created", "--data", str(data))
    ).out.strip()
    assert event_id.startswith("evt_")
    again = json.loads(
        ok(
            run(
                "event",
                "publish",
                club,
                "registration.created",
                "--data",
                "-",
                "--json",
                stdin=json.dumps(registration()).encode(),
            )
        ).out
    )
    assert again["id"] != event_id
    listed = json.loads(ok(run("delivery", "list", club, "--endpoint", endpoint_id, "--json")).out)
    assert [(d["status"], d["attempt"], d["endpointId"], d["event"]) for d in listed] == [
        ("pending", 0, endpoint_id, "registration.created")
    ] * 2
    assert set(listed[0]) >= {
        "id",
        "eventId",
        "endpointId",
        "status",
        "attempt",
        "responseCode",
        "nextAttemptAt",
    }
    assert json.loads(ok(run("delivery", "list", club, "--status", "dead", "--json")).out) == []
    retried = json.loads(ok(run("delivery", "retry", listed[0]["id"], "--json")).out)
    assert retried["id"] == listed[0]["id"]
    assert "no delivery" in one_line_error(run("delivery", "retry", "dlv_nope"))


def test_event_publish_refuses_invalid_data(run: Invoke, club: str, tmp_path: Path) -> None:
    data = tmp_path / "data.json"
    data.write_text(json.dumps({"member": {"name": "x"}}))
    assert "data." in one_line_error(
        run("event", "publish", club, "member.updated", "--data", str(data))
    )
    assert "ping" in one_line_error(
        run("event", "publish", club, "ping", "--data", str(data)), code=2
    )


def test_event_publish_refuses_an_idempotency_key_reused_for_other_data(
    run: Invoke, club: str
) -> None:
    def publish(data: dict[str, object]) -> Result:
        command = ["event", "publish", club, "registration.created", "--data", "-"]
        return run(*command, "--idempotency-key", "k-1", stdin=json.dumps(data).encode())

    first = ok(publish(registration())).out.strip()
    assert ok(publish(registration())).out.strip() == first
    assert f"first used for {first}" in one_line_error(publish(registration(invoice=None)))


@pytest.mark.parametrize("kind", event_catalog.KINDS)
def test_event_sample_prints_valid_data(run: Invoke, kind: str) -> None:
    event_catalog.validate(kind, json.loads(ok(run("event", "sample", kind)).out))


def test_user_create_reads_the_password_from_stdin(run: Invoke, club: str) -> None:
    created = json.loads(
        ok(
            run(
                "user",
                "create",
                "skip@granite.example",
                "--club",
                club,
                "--password-stdin",
                "--json",
                stdin=b"a long enough password\n",
            )
        ).out
    )
    assert (created["email"], created["clubs"]) == ("skip@granite.example", [club])
    line = one_line_error(
        run("user", "create", "x@granite.example", "--password-stdin", stdin=b"short\n")
    )
    assert "12 characters" in line


HEADER_VALUE = "k3y-0f9e-never-printed"


def _headers(run: Invoke, club: str) -> object:
    """The ``headers`` of the club's one endpoint, as ``endpoint list --json`` prints them."""
    [endpoint] = json.loads(ok(run("endpoint", "list", club, "--json")).out)
    return endpoint["headers"]


def test_headers_are_set_listed_by_name_replaced_and_removed(run: Invoke, club: str) -> None:
    created = _create_with(
        run, club, "--header", f"X-Api-Key: {HEADER_VALUE}", "--header", "Authorization: Bearer t"
    )
    assert created["headers"] == ["X-Api-Key", "Authorization"]
    endpoint_id = str(created["id"])
    listed = ok(run("endpoint", "list", club, "--json")).out
    table = ok(run("endpoint", "list", club)).out
    assert HEADER_VALUE not in listed + table
    assert re.search(rf"^{endpoint_id}\s.*\sX-Api-Key,Authorization\s+on\s", table, re.MULTILINE)
    replace = ("--header", "x-api-key: other", "--remove-header", "AUTHORIZATION")
    changed = json.loads(ok(run("endpoint", "update", endpoint_id, *replace, "--json")).out)
    assert changed["headers"] == ["x-api-key"]
    removed = ok(run("endpoint", "update", endpoint_id, "--remove-header", "X-API-KEY"))
    assert removed.out.strip() == f"Updated {endpoint_id}."
    assert _headers(run, club) == []


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        (HEADER_VALUE, "A header is written Name: value, with a colon after its name."),
        (f"X-Api-Key: {HEADER_VALUE}\r\nX-Evil: 1", "The value of X-Api-Key holds a line break"),
        (f"X-Api-Key: {HEADER_VALUE}\x7f", "The value of X-Api-Key holds a control character"),
        (f"X-Api-Key: {HEADER_VALUE}é", "The value of X-Api-Key holds a character that is not"),
        (f"X-Api\u2010Key: {HEADER_VALUE}", "A header's name holds the character U+2010"),
        (
            f"X-Api-Key: {HEADER_VALUE}{'x' * 10_000}",
            "The value of X-Api-Key has 10022 characters: at most 1000.",
        ),
        (f"Host: {HEADER_VALUE}", "Host cannot be one of an endpoint's headers: HTTP sends"),
        (f"x-service-event: {HEADER_VALUE}", "x-service-event cannot be one of an endpoint's"),
        (f"WEBHOOK-ID: {HEADER_VALUE}", "WEBHOOK-ID cannot be one of an endpoint's headers"),
        (f"TE: {HEADER_VALUE}", "TE cannot be one of an endpoint's headers: it is a hop-by-hop"),
    ],
)
def test_a_bad_header_is_refused_in_one_line_never_quoted_and_nothing_stored(
    run: Invoke, club: str, header: str, needle: str
) -> None:
    endpoint_id = str(_create_with(run, club, "--header", "X-Kept: kept")["id"])
    for line in _usage_errors(run, club, endpoint_id, "--header", header):
        assert f"Invalid value for '--header': {needle}" in line
        assert HEADER_VALUE not in line
    assert _headers(run, club) == ["X-Kept"]


@pytest.mark.parametrize(
    "flags", [("--header", "X-Api-Key: {}\x00"), ("--header=X-Api-Key: {}\x00",)]
)
def test_a_header_holding_nul_is_refused_without_quoting_it(
    run: Invoke, club: str, flags: tuple[str, ...]
) -> None:
    endpoint_id = str(_create_with(run, club)["id"])
    given = [flag.format(HEADER_VALUE) for flag in flags]
    line = one_line_error(run("endpoint", "update", endpoint_id, *given))
    assert line == (
        "clubwire: error: the argument of --header must not contain NUL characters (\\u0000)"
    )
    assert _headers(run, club) == []


def test_an_eleventh_header_or_one_not_there_is_refused_and_nothing_changes(
    run: Invoke, club: str
) -> None:
    ten = [flag for i in range(10) for flag in ("--header", f"X-Own-{i}: {HEADER_VALUE}")]
    eleventh = ("--header", f"X-Own-10: {HEADER_VALUE}")
    too_many = (
        "clubwire: error: An endpoint has at most 10 headers of its own, and this would make 11: "
        "remove one first."
    )
    create = ("endpoint", "create", club, "https://127.0.0.1:9/x", "--event", "member.updated")
    assert one_line_error(run(*create, *ten, *eleventh)) == too_many
    endpoint_id = str(_create_with(run, club, *ten)["id"])
    assert one_line_error(run("endpoint", "update", endpoint_id, *eleventh)) == too_many
    gone = run("endpoint", "update", endpoint_id, "--remove-header", "X-Gone")
    assert one_line_error(gone) == "clubwire: error: X-Gone is not one of this endpoint's headers."
    assert _headers(run, club) == [f"X-Own-{i}" for i in range(10)]


def _ordered(run: Invoke, *args: str) -> object:
    """The ``ordered`` an ``endpoint`` command prints as JSON."""
    return json.loads(ok(run("endpoint", *args, "--json")).out)["ordered"]


def test_in_order_is_set_listed_switched_and_kept(run: Invoke, club: str) -> None:
    created = _create_with(run, club, "--ordered")
    endpoint_id = str(created["id"])
    assert created["ordered"] is True
    assert _create_with(run, club)["ordered"] is False
    row = re.compile(rf"^{endpoint_id}\s.*\snone\s+(in order|any)\s+0 of 5", re.MULTILINE)
    assert row.findall(ok(run("endpoint", "list", club)).out) == ["in order"]
    assert _ordered(run, "update", endpoint_id, "--event", "game.updated") is True
    assert _ordered(run, "update", endpoint_id, "--unordered") is False
    assert row.findall(ok(run("endpoint", "list", club)).out) == ["any"]
    assert _ordered(run, "update", endpoint_id, "--ordered") is True
    listed = json.loads(ok(run("endpoint", "list", club, "--json")).out)
    assert [endpoint["ordered"] for endpoint in listed] == [True, False]


def test_ordered_and_unordered_together_are_refused_in_one_line(run: Invoke, club: str) -> None:
    endpoint_id = str(_create_with(run, club, "--ordered")["id"])
    line = one_line_error(run("endpoint", "update", endpoint_id, "--ordered", "--unordered"), 2)
    assert line == (
        "clubwire: error: Give --ordered or --unordered, not both. "
        "(see: clubwire endpoint update --help)"
    )
    [listed] = json.loads(ok(run("endpoint", "list", club, "--json")).out)
    assert listed["ordered"] is True


def test_a_held_delivery_says_what_it_waits_for_and_is_not_retried(
    run: Invoke, club: str, tmp_path: Path
) -> None:
    ordered = ("--ordered", "--event", "registration.created")
    endpoint_id = str(_create_with(run, club, *ordered)["id"])
    data = tmp_path / "data.json"
    data.write_text(json.dumps(registration()))
    for _ in range(2):
        ok(run("event", "publish", club, "registration.created", "--data", str(data)))
    held, first = json.loads(ok(run("delivery", "list", club, "--json")).out)
    key = first["orderingKey"]
    assert key.startswith("invoice:")
    assert (first["sequence"], first["waitsFor"], first["inOrder"]) == (1, None, True)
    assert (held["sequence"], held["waitsFor"], held["nextAttemptAt"]) == (2, 1, None)
    waiting = f"waiting for sequence 1 of {key} to be delivered"
    table = ok(run("delivery", "list", club, "--endpoint", endpoint_id)).out
    assert re.search(rf"^{held['id']}\s.*\spending\s+0\s+-\s+-\s+{waiting}$", table, re.M)
    shown = ok(run("delivery", "show", held["id"])).out
    assert f"Resource     {key} sequence 2, in order\n" in shown
    assert f"Next attempt {waiting}\n" in shown
    assert json.loads(ok(run("delivery", "show", held["id"], "--json")).out)["waitsFor"] == 1
    refused = one_line_error(run("delivery", "retry", held["id"]))
    assert f"It waits for the delivery of sequence 1 of {key}, which goes first" in refused
