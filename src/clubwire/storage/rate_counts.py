"""The API's request counts shared by every API process (ADR 0009): one row per partition
(``bucket``) and window, to which each process adds what it counted since it last did. One
statement adds a process's counts and answers with every process's totals; the same SQL runs
on SQLite (3.35 or later) and PostgreSQL."""

from __future__ import annotations

import functools
from collections.abc import Sequence

from sqlalchemy import Connection, TextClause, text

Count = tuple[str, int, int]  # bucket, window number, requests

CHUNK = 64  # the most buckets a statement adds to; each adds a power of two of them

_PRUNE = text("DELETE FROM rate_counts WHERE window_number < :before")


def add(connection: Connection, counts: Sequence[Count]) -> list[Count]:
    """Add ``counts`` (a bucket at most once each), and return the totals they reached;
    ``CHUNK`` buckets a statement, and the rest by powers of two."""
    totals: list[Count] = []
    start = 0
    for size in _sizes(len(counts)):
        chunk, start = counts[start : start + size], start + size
        values: dict[str, object] = {}
        for n, (bucket, window, count) in enumerate(chunk):
            values[f"b{n}"], values[f"w{n}"], values[f"c{n}"] = bucket, window, count
        found = connection.execute(_adding(len(chunk)), values)
        totals += [(str(b), int(w), int(c)) for b, w, c in found]
    return totals


def _sizes(count: int) -> list[int]:
    """``count`` as ``CHUNK``s and distinct powers of two below it (150: 64, 64, 16, 4, 2)."""
    rest = count % CHUNK
    powers = range(CHUNK.bit_length() - 1, -1, -1)
    return [CHUNK] * (count // CHUNK) + [1 << bit for bit in powers if rest >> bit & 1]


@functools.cache
def _adding(rows: int) -> TextClause:
    """The statement that adds ``rows`` buckets' counts: ``CHUNK`` of them or a power of two
    below, so that a process counting for thousands of clubs a second makes a handful of
    statements of at most 7 shapes, each compiled once. One statement the size of each
    second's buckets was a new statement almost every second, each kept by SQLAlchemy's
    compiled cache (about 25 MB at 8,000 buckets): a serve process over 10,000 clubs grew
    past 3 GB (bench/kept.py). Every size up to 100 was still a shape each, the last ones
    made and kept late in a process's life (a creep of a few MB, issue 38)."""
    placeholders = ", ".join(f"(:b{n}, :w{n}, :c{n})" for n in range(rows))
    return text(
        f"""
        INSERT INTO rate_counts (bucket, window_number, count) VALUES {placeholders}
        ON CONFLICT (bucket, window_number) DO UPDATE SET count = rate_counts.count + excluded.count
        RETURNING bucket, window_number, count
        """  # noqa: S608 (placeholders of ours, values bound)
    )


def prune(connection: Connection, before: int) -> None:
    """Forget the windows numbered below ``before``."""
    connection.execute(_PRUNE, {"before": before})
