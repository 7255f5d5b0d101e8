"""Fenced code blocks of the docs, and the convention that says which of them run.

A block's info string is its language, then optional words:

* ``python``: run with this virtual environment's Python; ``js``: run with ``node`` (as an ES
  module); ``sh``: every ``sh`` block of a document runs, in order, as one ``bash -euo
  pipefail`` script, like commands pasted into one terminal.
* ``file=NAME``: the block is also saved as ``NAME`` beside the others, so that a later block
  can import it.
* ``receiver``: the block is a webhook receiver listening on ``$PORT``; the test sends it a
  real signed delivery and forged ones (``tests/docs/test_examples.py``).
* Any other language (``json``, ``http``, ``text``, ``ini``, ``console`` for a terminal
  session to read) is not run; ``json`` and ``http`` examples of API answers and events are
  compared with what the code produces by their own tests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)

PYTHON = frozenset({"python", "py"})
NODE = frozenset({"js", "javascript", "mjs"})
SHELL = frozenset({"sh", "bash", "shell"})
RUNNABLE = PYTHON | NODE | SHELL


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    lang: str
    words: tuple[str, ...]
    text: str

    @property
    def name(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def file(self) -> str | None:
        for word in self.words:
            if word.startswith("file="):
                return word.removeprefix("file=")
        return None

    @property
    def receiver(self) -> bool:
        return "receiver" in self.words

    @property
    def runnable(self) -> bool:
        return self.lang in RUNNABLE

    @property
    def script_name(self) -> str:
        """The file name the block runs as."""
        if self.file:
            return self.file
        suffix = ".py" if self.lang in PYTHON else ".mjs" if self.lang in NODE else ".sh"
        return f"example_{self.line}{suffix}"


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        lang, *words = match.group(1).split() or [""]
        line = text.count("\n", 0, match.start()) + 1
        found.append(Block(doc, line, lang, tuple(words), match.group(2)))
    return found


def all_blocks() -> list[Block]:
    return [block for doc in documents() for block in blocks(doc)]
