"""``Recent``: a mapping that keeps the entries used most recently, at most a given number.

What an API process keeps per club or per key (key rows, program listings, when a key's use
was last written) is bounded by it, whatever the number of clubs: the busiest stay, the
others are read again when they come back. A dict keeps its keys in the order they were
put in, so the least recently used is always its first: reading an entry puts it back at the
end (two operations in C), and keeping one past the bound drops the first.
"""

from __future__ import annotations

from typing import Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")
_MISSING = object()


class Recent(Generic[K, V]):
    """At most ``size`` entries (at least one), the least recently used forgotten first."""

    __slots__ = ("_entries", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"a Recent keeps at least one entry, not {size}")
        self.size = size
        self._entries: dict[K, V] = {}

    def get(self, key: K) -> V | None:
        """The entry kept for ``key``, now the most recently used (None: none)."""
        entries = self._entries
        found = entries.pop(key, _MISSING)
        if found is _MISSING:
            return None
        entries[key] = found  # type: ignore[assignment]
        return found  # type: ignore[return-value]

    def keep(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key``, the most recently used; past ``size``, the least
        recently used entry is forgotten."""
        entries = self._entries
        entries.pop(key, None)
        entries[key] = value
        if len(entries) > self.size:
            del entries[next(iter(entries))]

    def clear(self) -> None:
        self._entries.clear()

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)
