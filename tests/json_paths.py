"""Paths into JSON data (``("member", "email")``, ``("sides", 0)``): read from dotted text,
set, deleted, walked, and shown as a validation error names them. Shared by the event
catalog's unit tests and the functional tests of text the database cannot hold."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Path = tuple[str | int, ...]


def parse(dotted: str) -> Path:
    return tuple(int(part) if part.isdigit() else part for part in dotted.split("."))


def set_at(data: Any, path: Path, value: object) -> None:
    for part in path[:-1]:
        data = data[part]
    data[path[-1]] = value


def delete_at(data: Any, path: Path) -> None:
    for part in path[:-1]:
        data = data[part]
    del data[path[-1]]


def paths(node: object, prefix: Path = ()) -> Iterator[tuple[Path, object]]:
    """Every (path, value) below ``node``, depth first, the node itself first."""
    yield prefix, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from paths(value, (*prefix, index))


def shown(path: Path) -> str:
    return "data" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
