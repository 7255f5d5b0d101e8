"""The published vectors of docs/webhook-signature-vectors.md, read from the document.

Each ``### Vector …`` section holds a ``text`` block (the body as it travels) and a ``json``
block with ``secret``, ``timestamp``, ``body``, optional ``body_hex`` and ``header``. Shared by
the tests of our scheme (``tests/unit/test_signature_vectors.py``) and of the Standard Webhooks
one (``tests/unit/domain/test_standard_signature_vectors.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "webhook-signature-vectors.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)\n```$", re.MULTILINE | re.DOTALL)
SECTION = re.compile(r"^### (Vector .*)$", re.MULTILINE)


@dataclass(frozen=True)
class Vector:
    title: str
    fields: dict[str, object]
    texts: list[str]

    @property
    def secret(self) -> str:
        return str(self.fields["secret"])

    @property
    def timestamp(self) -> int:
        value = self.fields["timestamp"]
        assert isinstance(value, int)
        return value

    @property
    def body(self) -> bytes:
        return str(self.fields["body"]).encode("utf-8")

    @property
    def header(self) -> str:
        return str(self.fields["header"])


def blocks(text: str, lang: str) -> list[str]:
    return [m.group(2) for m in FENCE.finditer(text) if m.group(1) == lang]


def load(doc: str) -> list[Vector]:
    parts = SECTION.split(doc)[1:]
    vectors = []
    for title, content in zip(parts[::2], parts[1::2], strict=True):
        (fields,) = (json.loads(b) for b in blocks(content, "json"))
        vectors.append(Vector(title, fields, blocks(content, "text")))
    return vectors


DOC_TEXT = DOC.read_text(encoding="utf-8")
VECTORS = load(DOC_TEXT)
