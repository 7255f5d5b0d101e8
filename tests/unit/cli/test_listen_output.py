"""What ``clubwire listen`` prints for each delivery (one block, which it writes at once)."""

from __future__ import annotations

from clubwire.cli import listening
from clubwire.receiving import Arrival

BODY = b'{"id":"evt_0123","type":"payment.completed","data":{"amount":"12.00"}}'


def test_a_verified_delivery_shows_its_signature_and_body_then_a_blank_line() -> None:
    arrival = Arrival("payment.completed", "dlv_1", BODY, 200, 0.01, signed_at=1_700_000_000)
    lines = listening.block(arrival).split("\n")
    assert lines[0].endswith(" ✓ payment.completed evt_0123 dlv_1 verified (200)")
    assert lines[1].startswith("  signature  t=1700000000 (")
    assert lines[1].endswith(" s ago): v1 matches the secret")
    assert lines[2:4] == ["  {", '    "id": "evt_0123",']
    assert lines[-3:] == ["  }", "", ""]  # the body's last line, a blank line, the end


def test_a_body_that_is_not_json_is_shown_as_text_with_its_bad_bytes_replaced() -> None:
    arrival = Arrival("payment.completed", "dlv_1", b"ok\xff\nline two", 200, 0.01, 1_700_000_000)
    assert listening.block(arrival).endswith("\n  ok\ufffd\n  line two\n\n")


def test_control_characters_in_a_body_are_shown_escaped_not_sent_to_the_terminal() -> None:
    clear_screen = b"ok\x1b[2J\x07 \xe2\x80\xae"  # ESC [2J, BEL, right-to-left override
    arrival = Arrival("payment.completed", "dlv_1", clear_screen, 200, 0.01, 1_700_000_000)
    assert listening.block(arrival).endswith("\n  ok\\x1b[2J\\x07 \\u202e\n\n")
    envelope = b'{"id":"evt_0123","data":{"note":"\xe2\x80\xaeevil"}}'
    arrival = Arrival("payment.completed", "dlv_1", envelope, 200, 0.01, 1_700_000_000)
    assert '"note": "\\u202eevil"' in listening.block(arrival)


def test_a_rejected_delivery_is_its_summary_alone() -> None:
    arrival = Arrival("payment.completed", "dlv_1", b"\xff\x00", 400, 0.01, None, "bad")
    printed = listening.block(arrival)
    assert printed.endswith(" ✗ payment.completed dlv_1 rejected (400): bad\n")
    assert printed.count("\n") == 1
