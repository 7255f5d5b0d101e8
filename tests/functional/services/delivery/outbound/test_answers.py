"""What the webhook client makes of an answer: success, deadlines, bodies, breaks, TLS, the URL.

Every receiver is started inside the test on a free port. Attempts use
``attempt_timeout=1.0`` (``DEADLINE``), which connecting may take all of.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import trustme

from clubwire.services.delivery.outbound import Answer, Sender
from tests.functional.services.delivery.outbound import delivering
from tests.functional.services.delivery.outbound.harness import (
    BODY,
    DEADLINE,
    HEADERS,
    Receiver,
    Tls,
    answering,
    closing_mid_body,
    endless,
    garbage,
    post,
    resetting,
    response,
    run,
    server_context,
    settings_for,
    silent,
    trickle_body,
    trickling,
    within,
)
from tests.ports import free_port

# -- success -----------------------------------------------------------------------------


def test_a_2xx_answer_is_a_success_with_an_excerpt(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> tuple[Answer, Receiver]:
        async with Receiver(answering(200, b'{"received":true}'), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url()), receiver

    outcome, receiver = run(scenario())

    assert outcome.ok
    assert (outcome.status, outcome.error) == (200, None)
    assert outcome.excerpt == '{"received":true}'
    [request] = receiver.requests
    assert request.head.startswith("POST /hook HTTP/1.1")
    assert request.body == BODY
    assert request.header("Accept-Encoding") == "identity"
    assert request.header("X-Service-Event") == "ping"


def test_connections_are_kept_alive_between_attempts(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> tuple[list[Answer], Receiver]:
        async with (
            Receiver(answering(204), tls.server) as receiver,
            Sender(settings_for(tmp_path, tls)) as sender,
        ):
            outcomes = [await sender.post(receiver.url(), BODY, HEADERS) for _ in range(3)]
        return outcomes, receiver

    outcomes, receiver = run(scenario())

    assert all(outcome.ok for outcome in outcomes)
    assert (receiver.connections, len(receiver.requests)) == (1, 3)


def test_a_non_2xx_answer_is_a_failure_without_an_error(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(answering(500, b"oops <b>"), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())

    assert not outcome.ok
    assert (outcome.status, outcome.error, outcome.excerpt) == (500, None, "oops <b>")


# -- deadlines and bodies ----------------------------------------------------------------


def test_a_silent_receiver_times_out_at_the_deadline(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(silent, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    with within(DEADLINE + 0.5):
        outcome = run(scenario())

    assert (outcome.status, outcome.error) == (None, "timeout")
    assert DEADLINE * 1000 - 50 <= outcome.duration_ms <= DEADLINE * 1000 + 300


def test_a_trickling_status_line_times_out(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(trickling(response(200, b"fine")), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    with within(DEADLINE + 0.5):
        outcome = run(scenario())

    assert (outcome.status, outcome.error) == (None, "timeout")


def test_a_trickling_body_times_out_even_after_a_200(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(trickle_body, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    with within(DEADLINE + 0.5):
        outcome = run(scenario())

    assert (outcome.status, outcome.error) == (200, "timeout")
    assert not outcome.ok
    assert 1 <= len(outcome.excerpt) < 100
    assert set(outcome.excerpt) == {"x"}


def test_control_characters_in_an_answer_are_escaped(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(answering(200, b"ok\x00\x1b\xffdone\n"), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    assert run(scenario()).excerpt == "ok\\x00\\x1b\ufffddone\n"


@pytest.mark.parametrize(
    ("fields", "kept"),
    [
        (b"", None),
        (b"Retry-After: 120\r\n", "120"),
        (b"Retry-After: Mon, 05 Jan 2026 13:00:00 GMT\r\n", "Mon, 05 Jan 2026 13:00:00 GMT"),
        (b"Retry-After: 120\r\nRetry-After: 3600\r\n", "120, 3600"),  # several: joined
        (b"Retry-After: 12\xff0\r\n", "12\\xff0"),  # a byte that is not UTF-8
        (b"Retry-After: \xd9\xa1\xd9\xa2\r\n", "\u0661\u0662"),  # UTF-8, not ASCII
        (b"Retry-After: " + b"9" * 150 + b"\r\n", "9" * 99 + "…"),  # cut to its column
    ],
)
def test_a_retry_after_is_kept_as_given_and_made_safe(
    tmp_path: Path, tls: Tls, fields: bytes, kept: str | None
) -> None:
    answer = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n" + fields + b"\r\n"

    async def scenario() -> Answer:
        async with Receiver(delivering.raw(answer), tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())
    assert (outcome.status, outcome.retry_after) == (503, kept)


def test_an_endless_body_is_read_up_to_64_kib_then_dropped(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(endless, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())

    assert outcome.ok  # reading stopped at 64 KiB, well before the deadline
    assert outcome.duration_ms < DEADLINE * 1000
    assert outcome.excerpt == "a" * 1000


def test_a_long_body_is_cut_and_its_connection_not_reused(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> tuple[list[Answer], Receiver]:
        body = "é".encode() * 100_000
        async with (
            Receiver(answering(200, body), tls.server) as receiver,
            Sender(settings_for(tmp_path, tls)) as sender,
        ):
            outcomes = [await sender.post(receiver.url(), BODY, HEADERS) for _ in range(2)]
        return outcomes, receiver

    outcomes, receiver = run(scenario())

    assert all(outcome.ok and outcome.excerpt == "é" * 1000 for outcome in outcomes)
    assert receiver.connections == 2


# -- broken connections and TLS ----------------------------------------------------------


def test_a_reset_mid_response_is_a_connection_reset(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(resetting, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())

    assert (outcome.status, outcome.error, outcome.excerpt) == (200, "connection reset", "x" * 10)
    assert not outcome.ok


def test_a_close_mid_body_is_an_incomplete_body(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(closing_mid_body, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    outcome = run(scenario())

    assert (outcome.status, outcome.error) == (200, "response body incomplete")


def test_a_closed_port_is_connection_refused(tmp_path: Path, tls: Tls) -> None:
    outcome = run(post(settings_for(tmp_path, tls), f"https://127.0.0.1:{free_port()}/"))

    assert (outcome.status, outcome.error) == (None, "connection refused")


def test_an_answer_that_is_not_http_is_an_invalid_response(tmp_path: Path, tls: Tls) -> None:
    async def scenario() -> Answer:
        async with Receiver(garbage, tls.server) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url())

    assert run(scenario()).error == "invalid http response"


def test_a_certificate_from_an_unknown_ca_is_refused(tmp_path: Path, tls: Tls) -> None:
    stranger = server_context(trustme.CA().issue_cert("localhost", "127.0.0.1"))

    async def scenario() -> tuple[Answer, Receiver]:
        async with Receiver(answering(200), stranger) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url()), receiver

    outcome, receiver = run(scenario())

    assert (outcome.status, outcome.error) == (None, "tls: certificate verify failed")
    assert receiver.requests == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_certificate_for_another_name_is_refused(tmp_path: Path, tls: Tls, host: str) -> None:
    other = server_context(tls.ca.issue_cert("other.example"))

    async def scenario() -> tuple[Answer, Receiver]:
        async with Receiver(answering(200), other) as receiver:
            return await post(settings_for(tmp_path, tls), receiver.url(host)), receiver

    outcome, receiver = run(scenario())

    assert (outcome.status, outcome.error) == (None, "tls: host name mismatch")
    assert receiver.requests == []


# -- the URL itself ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("http://hook.example/", "invalid url: URL must use https://"),
        ("https://u:p@hook.example/", "invalid url: URL must not contain a user name or password"),
        ("https://hook.example:0/", "invalid url: URL port must be a number from 1 to 65535"),
    ],
)
def test_an_unsafe_url_is_an_outcome_not_an_exception(
    tmp_path: Path, tls: Tls, url: str, error: str
) -> None:
    outcome = run(post(settings_for(tmp_path, tls), url))

    assert (outcome.status, outcome.error) == (None, error)


def test_posting_outside_the_context_is_a_programming_error(tmp_path: Path, tls: Tls) -> None:
    sender = Sender(settings_for(tmp_path, tls))

    with pytest.raises(RuntimeError, match="async with"):
        run(sender.post("https://hook.example/", BODY, HEADERS))
