"""The emails' text and message: one line for whatever came from outside, no header added
by it, no secret of a URL shown, and what happens next said plainly."""

from __future__ import annotations

from email import message_from_bytes, policy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import emails, off_reasons
from tests.factories import EPOCH

LINK = "https://hooks.example/settings/granite/webhooks#endpoint-we_1"


def _endpoint(url: str = "https://rx.example/hooks", **overrides: object) -> emails.FailingEndpoint:
    values: dict[str, object] = {
        "club_name": "Granite Curling Club",
        "url": url,
        "link": LINK,
        "response_code": 503,
        "error": None,
    }
    values.update(overrides)
    return emails.FailingEndpoint(**values)  # type: ignore[arg-type]


@given(st.text(max_size=300))
def test_one_line_has_no_line_break_or_control(value: str) -> None:
    line = emails.one_line(value)
    assert len(line) <= 500
    assert all(c.isprintable() for c in line)
    assert line == line.strip()


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://rx.example/hooks", "https://rx.example/hooks"),
        ("https://user:pw@rx.example:8443/hooks?token=abc#x", "https://rx.example:8443/hooks?…"),
    ],
)
def test_a_url_is_shown_without_what_may_be_secret(url: str, shown: str) -> None:
    assert emails.shown_url(url) == shown


def test_the_warning_says_how_many_more_switch_it_off() -> None:
    draft = emails.failing(_endpoint(error="connection refused"), 3, 5)
    assert draft.subject == "Webhook deliveries are failing: https://rx.example/hooks"
    assert "If 2 more deliveries fail in a row, the endpoint is switched off" in draft.body
    assert "Last answer from the receiver: HTTP 503 – connection refused" in draft.body
    assert LINK in draft.body
    assert "If 1 more delivery fails in a row" in emails.failing(_endpoint(), 4, 5).body


def test_the_switch_off_says_what_happens_next() -> None:
    draft = emails.switched_off(
        _endpoint(response_code=None, error="timed out"), off_reasons.OffReason.DEAD_IN_A_ROW, 5
    )
    assert draft.subject == "Webhook endpoint switched off: https://rx.example/hooks"
    assert "because 5 deliveries in a row failed" in draft.body
    assert "Last answer from the receiver: timed out" in draft.body
    assert "resend the skipped deliveries" in draft.body


def test_a_switch_off_for_410_gone_says_so_and_counts_no_deliveries() -> None:
    draft = emails.switched_off(_endpoint(response_code=410), off_reasons.OffReason.GONE, 5)
    assert draft.subject == "Webhook endpoint switched off: https://rx.example/hooks"
    assert "because its receiver answered 410 Gone" in draft.body
    assert "Last answer from the receiver: HTTP 410" in draft.body
    assert "in a row" not in draft.body
    assert "5 deliveries" not in draft.body
    assert "If the receiver should get webhooks again, switch the endpoint back on" in draft.body


def test_no_header_can_be_added_through_what_came_from_outside() -> None:
    hostile = _endpoint(
        url="https://rx.example/a\r\nBcc: thief@evil.example",
        club_name="Granite\r\nBcc: thief@evil.example",
        error="bad\nBcc: thief@evil.example",
    )
    draft = emails.failing(hostile, 3, 5)
    message = emails.compose(
        "hooks@granite.example",
        "ann@granite.example\r\nBcc: thief@evil.example",
        draft,
        emails.message_id("eml_1", "Granite hooks <hooks@granite.example>"),
        EPOCH,
    )
    parsed = message_from_bytes(message.as_bytes(), policy=policy.default)
    assert parsed["Bcc"] is None
    assert [name for name, _ in parsed.items()] == [
        "From",
        "To",
        "Subject",
        "Date",
        "Message-ID",
        "Auto-Submitted",
        "Content-Type",
        "Content-Transfer-Encoding",
        "MIME-Version",
    ]
    assert parsed["Message-ID"] == "<eml_1@granite.example>"
    assert parsed["Date"] == "Mon, 05 Jan 2026 12:00:00 +0000"
    assert parsed.get_content_type() == "text/plain"
