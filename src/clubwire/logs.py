"""Logs as JSON lines on standard error, one object per line; never a key, a secret, a
signature, a query string, a credential header, or words a receiver wrote (``unquoted``).

``configure`` makes every log record of the process such a line:
``{"time", "level", "logger", "message"}`` (and ``"error"`` with a traceback). Event lines
(``{"time", "level", "event", …fields}``: one per HTTP request, one per delivery attempt)
are on hot paths, so ``event`` writes them with one ``orjson.dumps`` straight to the file,
past the ``logging`` machinery (2 µs a line instead of 9), and flushed every 0.1 s (a crash
loses at most that much; a write per line cost the API ~20 % of its throughput). Before
``configure`` (tests, a host program) event lines go through the standard logger
``clubwire.events`` instead. No line ever fails for what its fields hold: text orjson refuses
(a lone surrogate from an undecodable byte) is written escaped, any other value as its text.
"""

from __future__ import annotations

import asyncio
import atexit
import io
import logging
import sys
import weakref
from collections.abc import Callable
from datetime import UTC, datetime
from typing import BinaryIO, Literal, TextIO

import orjson

from clubwire.domain import text

Level = Literal["debug", "info", "warning", "error"]
LEVELS: dict[Level, int] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
}
BUFFER_SIZE = 1 << 16  # bytes of event lines held before they are written, at most
FLUSH_AFTER = 0.1  # seconds: event lines written in an event loop wait at most this long
_OPTIONS = orjson.OPT_UTC_Z | orjson.OPT_APPEND_NEWLINE
_NAMES = {number: name for name, number in LEVELS.items()} | {logging.CRITICAL: "critical"}
_UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.asgi")
UNQUOTED = "[not logged]"  # in place of a receiver's words

# The current span's ``trace_id`` and ``span_id`` (None: no span).
TraceIds = Callable[[], dict[str, object] | None]

_fallback = logging.getLogger("clubwire.events")
_buffers: weakref.WeakKeyDictionary[io.RawIOBase, io.BufferedWriter] = weakref.WeakKeyDictionary()


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object (an event line when it carries ``fields``)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, object] = {
            "time": datetime.fromtimestamp(record.created, UTC),
            "level": _NAMES.get(record.levelno, record.levelname.lower()),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            line |= {"event": record.msg, **fields}
        else:
            line |= {"logger": record.name, "message": record.getMessage()}
        if _traces.ids is not None and (ids := _traces.ids()):
            line |= ids
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return _dumps(line, orjson.OPT_UTC_Z).decode()


class _Destination:
    """Where ``event`` writes: beside the handler ``configure`` installed, at its level."""

    handler: logging.Handler | None = None
    write: Callable[[bytes], None] | None = None
    level = logging.INFO


class _Traces:
    """Where a line written in a span finds the span's ids (``join_traces``)."""

    ids: TraceIds | None = None


_destination = _Destination()
_traces = _Traces()


def configure(level: Level = "info", stream: TextIO | None = None) -> None:
    """JSON lines on ``stream`` (standard error) from every logger of the process, at
    ``level`` and above; uvicorn's loggers included (its access log stays off)."""
    stream = stream or sys.stderr
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.setLevel(LEVELS[level])  # records of loggers set lower than the root's, too
    root = logging.getLogger()
    if _destination.handler is not None:
        root.removeHandler(_destination.handler)
    root.addHandler(handler)
    root.setLevel(LEVELS[level])
    for name in _UVICORN:
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True
    _destination.handler, _destination.write = handler, _writer(stream)
    _destination.level = LEVELS[level]


def _writer(stream: TextIO) -> Callable[[bytes], None]:
    """Writes one line: as bytes to the file under a text stream where there is one (its own
    lock keeps lines from threads whole), else as text. In an event loop lines are flushed
    ``FLUSH_AFTER`` seconds after the first one (or when the buffer fills), so that a busy
    server makes one system call for many lines, not one per request."""
    binary = _buffered(getattr(stream, "buffer", None))
    if binary is None:

        def write_text(line: bytes) -> None:
            stream.write(line.decode())
            stream.flush()

        return write_text
    scheduled = False

    def flush() -> None:
        nonlocal scheduled
        scheduled = False
        binary.flush()

    def write(line: bytes) -> None:
        nonlocal scheduled
        binary.write(line)
        if scheduled:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            binary.flush()
            return
        scheduled = True
        loop.call_later(FLUSH_AFTER, flush)

    return write


def _buffered(binary: BinaryIO | None) -> BinaryIO | None:
    """``binary``, or where it is unbuffered (standard error is: one system call a line), a
    buffer over the same file descriptor, one for each stream, flushed at exit too."""
    if not isinstance(binary, io.RawIOBase):
        return binary
    if binary not in _buffers:
        raw = io.FileIO(binary.fileno(), "wb", closefd=False)
        _buffers[binary] = io.BufferedWriter(raw, BUFFER_SIZE)
        atexit.register(_buffers[binary].flush)
    return _buffers[binary]


def enabled(level: int = logging.INFO) -> bool:
    """Whether an event line at ``level`` would be written: callers on hot paths ask before
    building its fields."""
    if _destination.write is None:
        return _fallback.isEnabledFor(level)
    return level >= _destination.level


def join_traces(trace_ids: TraceIds | None) -> None:
    """Lines written in a span carry its ``trace_id`` and ``span_id``, as ``trace_ids``
    finds them (``clubwire.tracing``; None: no more)."""
    _traces.ids = trace_ids


def event(name: str, fields: dict[str, object], level: int = logging.INFO) -> None:
    """One event line: ``{"time", "level", "event": name, **fields}``, and the ids of the
    span it is written in, if any."""
    if _traces.ids is not None and (ids := _traces.ids()):
        fields = fields | ids
    write = _destination.write
    if write is None:
        _fallback.log(level, name, extra={"fields": fields})
    elif level >= _destination.level:
        line = {"time": datetime.now(UTC), "level": _NAMES.get(level, "info"), "event": name}
        write(_dumps(line | fields, _OPTIONS))


def unquoted(text: str | None, *quoted: str | None) -> str | None:
    """``text`` with the words of another party it quotes (``quoted``: a receiver's
    ``Location``, its ``Retry-After``) replaced by ``UNQUOTED``. A receiver may echo what it
    was sent, a member's name or email (DESIGN §9); the attempt stored keeps its words and an
    erasure scrubs them there, but a log line is shipped away and never erased."""
    for words in quoted:
        if text is not None and words:
            text = text.replace(words, UNQUOTED)
    return text


def _dumps(line: dict[str, object], option: int) -> bytes:
    """``line`` as JSON; mended first only when orjson refuses it, so a fine line costs
    nothing more."""
    try:
        return orjson.dumps(line, option=option, default=str)
    except orjson.JSONEncodeError:
        return orjson.dumps(_mended(line, _DEPTH), option=option)


_DEPTH = 8  # containers deeper than this are written as their text
_INT_RANGE = range(-(2**63), 2**64)  # the integers JSON readers take as numbers


def _mended(value: object, depth: int) -> object:
    """``value`` as orjson takes it: strings with their unsafe characters escaped
    (:func:`clubwire.domain.text.cleaned`), containers walked, numbers out of range and
    anything else as its escaped text."""
    if isinstance(value, str):
        return text.cleaned(value, sys.maxsize)
    if value is None or isinstance(value, bool | float | datetime):
        return value
    if isinstance(value, int) and value in _INT_RANGE:
        return value
    if depth > 0 and isinstance(value, dict):
        return {text.cleaned(str(k), sys.maxsize): _mended(v, depth - 1) for k, v in value.items()}
    if depth > 0 and isinstance(value, list | tuple):
        return [_mended(item, depth - 1) for item in value]
    return text.cleaned(str(value), sys.maxsize)
