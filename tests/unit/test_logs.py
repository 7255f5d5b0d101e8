"""JSON log lines: ordinary records and event lines, as ``logs.configure`` writes them."""

from __future__ import annotations

import asyncio
import io
import logging
from datetime import datetime
from pathlib import Path

import orjson
import pytest

from clubwire import logs
from tests.logcapture import capturing


def test_an_event_is_one_json_line_with_its_fields(monkeypatch: pytest.MonkeyPatch) -> None:
    with capturing(monkeypatch, "info") as captured:
        logs.event("request", {"method": "GET", "status": 200, "club": None})
    (line,) = captured.lines()
    assert line.pop("time").endswith("Z")
    assert line == {
        "level": "info",
        "event": "request",
        "method": "GET",
        "status": 200,
        "club": None,
    }
    assert captured.getvalue().count("\n") == 1


def test_lines_below_the_level_are_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    chatty = logging.getLogger("clubwire.test.chatty")
    monkeypatch.setattr(chatty, "level", logging.INFO)  # as uvicorn sets its own loggers
    with capturing(monkeypatch, "warning") as captured:
        logs.event("request", {"status": 200})
        logs.event("pruned", {"events": 3}, logging.WARNING)
        chatty.info("started")
        asked = (logs.enabled(), logs.enabled(logging.WARNING))
    assert [line["event"] for line in captured.lines()] == ["pruned"]
    assert asked == (False, True)  # so hot paths skip building lines that would be left out


def test_ordinary_records_become_json_too(monkeypatch: pytest.MonkeyPatch) -> None:
    with capturing(monkeypatch, "info") as captured:
        logging.getLogger("clubwire.test").info("hello %s", "there")
        try:
            raise ValueError("boom")
        except ValueError:
            logging.getLogger("clubwire.test").exception("it broke")
        logging.getLogger("clubwire.test").debug("not shown")
    hello, broke = captured.lines()
    assert datetime.fromisoformat(hello["time"]).tzinfo is not None
    assert {k: hello[k] for k in ("level", "logger", "message")} == {
        "level": "info",
        "logger": "clubwire.test",
        "message": "hello there",
    }
    assert broke["level"] == "error"
    assert "ValueError: boom" in broke["error"]


def test_without_configure_events_go_through_standard_logging(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, "clubwire.events"):
        logs.event("attempt", {"outcome": "succeeded"})
    (record,) = caplog.records
    assert (record.getMessage(), record.fields) == ("attempt", {"outcome": "succeeded"})  # type: ignore[attr-defined]
    assert '"outcome":"succeeded"' in logs.JsonFormatter().format(record)


@pytest.mark.parametrize("buffering", [0, 1 << 16], ids=["unbuffered", "buffered"])
def test_in_an_event_loop_lines_are_flushed_together_shortly_after(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, buffering: int
) -> None:
    """Standard error is unbuffered: it gets a buffer of its own, or every line would be a
    system call."""
    monkeypatch.setattr(logs, "FLUSH_AFTER", 0.01)
    path = tmp_path / "stderr"
    with path.open("wb", buffering=buffering) as binary:
        stream = io.TextIOWrapper(binary, write_through=True)

        async def two_lines() -> tuple[bytes, bytes]:
            logs.event("request", {"status": 200})
            logs.event("request", {"status": 404})
            before = path.read_bytes()
            await asyncio.sleep(0.05)
            return before, path.read_bytes()

        with capturing(monkeypatch, "info", stream):
            before, after = asyncio.run(two_lines())
            logs.event("pruned", {"events": 1})  # no loop: at once
            outside = path.read_bytes()
    assert before == b""
    assert [orjson.loads(line)["status"] for line in after.splitlines()] == [200, 404]
    assert orjson.loads(outside.splitlines()[-1])["event"] == "pruned"


class _Odd:
    def __str__(self) -> str:
        return "odd \udcff"


def test_fields_orjson_refuses_are_written_escaped(monkeypatch: pytest.MonkeyPatch) -> None:
    with capturing(monkeypatch, "info") as captured:
        logs.event(
            "attempt",
            {
                "error": "redirect not followed (302 to /\udcff\udcfe)",  # undecodable bytes
                "lone": "\ud800",
                "odd": _Odd(),
                "huge": 2**70,
                "nested": {"list": ["\udc80", 1, None], 7: True},
            },
        )
    (line,) = captured.lines()
    assert {key: line[key] for key in ("error", "lone", "odd", "huge", "nested")} == {
        "error": "redirect not followed (302 to /\\xff\\xfe)",
        "lone": "\\ud800",
        "odd": "odd \\xff",
        "huge": str(2**70),
        "nested": {"list": ["\\x80", 1, None], "7": True},
    }


def test_records_with_undecodable_text_are_json_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    logger = logging.getLogger("clubwire.test")
    with capturing(monkeypatch, "info") as captured:
        logger.warning("the answer was %s", "/\udcff")
        try:
            raise ValueError("bad \udcfe")
        except ValueError:
            logger.exception("it broke")
    answer, broke = captured.lines()
    assert answer["message"] == "the answer was /\\xff"
    assert "ValueError: bad \\xfe" in broke["error"]


def test_a_fine_line_is_never_mended(monkeypatch: pytest.MonkeyPatch) -> None:
    def mended(value: object, depth: int) -> object:
        raise AssertionError("a line orjson takes as it is costs no second look")

    monkeypatch.setattr(logs, "_mended", mended)
    with capturing(monkeypatch, "info") as captured:
        logs.event("request", {"path": "/é\u202e", "status": 200})
        logging.getLogger("clubwire.test").info("fine")
    assert [line.get("path", line.get("message")) for line in captured.lines()] == [
        "/é\u202e",
        "fine",
    ]


def test_before_configure_a_refused_field_is_written_escaped_too() -> None:
    record = logging.LogRecord("clubwire.events", logging.INFO, "", 0, "attempt", None, None)
    record.fields = {"error": "to /\udcff"}
    assert orjson.loads(logs.JsonFormatter().format(record))["error"] == "to /\\xff"


@pytest.mark.parametrize(
    ("text", "quoted", "expected"),
    [
        ("redirect not followed (302 to /x?a@b.example)", ("/x?a@b.example",), "redirect "
         f"not followed (302 to {logs.UNQUOTED})"),
        ("Zoë", ("Zoë",), logs.UNQUOTED),
        ("timeout", (None,), "timeout"),
        ("redirect not followed (302)", ("",), "redirect not followed (302)"),
        ("a b a", ("a", "b"), f"{logs.UNQUOTED} {logs.UNQUOTED} {logs.UNQUOTED}"),
        (None, ("a",), None),
    ],
)  # fmt: skip
def test_unquoted_leaves_out_every_place_a_receivers_words_are_quoted(
    text: str | None, quoted: tuple[str | None, ...], expected: str | None
) -> None:
    assert logs.unquoted(text, *quoted) == expected
