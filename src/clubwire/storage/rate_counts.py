"""The API's request counts shared by every API process (ADR 0009): one row per partition
(``bucket``) and window, to which each process adds what it counted since it last did. One
statement adds a process's counts and answers with every process's totals; the same SQL runs
on SQLite (3.35 or later) and PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Connection, text

Count = tuple[str, int, int]  # bucket, window number, requests

_PRUNE = text("DELETE FROM rate_counts WHERE window_number < :before")


def add(connection: Connection, counts: Sequence[Count]) -> list[Count]:
    """Add ``counts`` (a bucket at most once each), and return the totals they reached."""
    if not counts:
        return []
    rows = ", ".join(f"(:b{n}, :w{n}, :c{n})" for n in range(len(counts)))
    statement = text(
        f"""
        INSERT INTO rate_counts (bucket, window_number, count) VALUES {rows}
        ON CONFLICT (bucket, window_number) DO UPDATE SET count = rate_counts.count + excluded.count
        RETURNING bucket, window_number, count
        """  # noqa: S608 (placeholders of ours, values bound)
    )
    values: dict[str, object] = {}
    for n, (bucket, window, count) in enumerate(counts):
        values |= {f"b{n}": bucket, f"w{n}": window, f"c{n}": count}
    return [(str(b), int(w), int(c)) for b, w, c in connection.execute(statement, values)]


def prune(connection: Connection, before: int) -> None:
    """Forget the windows numbered below ``before``."""
    connection.execute(_PRUNE, {"before": before})
