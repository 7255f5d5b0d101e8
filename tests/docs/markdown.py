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


def section(doc: Path, heading: str) -> str:
    """The text of ``doc`` after ``heading`` (a whole heading line's text, ``## …``), up to
    the next second-level heading."""
    text = doc.read_text(encoding="utf-8")
    return text.split(heading, 1)[1].split("\n## ", 1)[0]


def console_steps(text: str) -> list[tuple[list[str], str]]:
    """Each command of the first ``console`` block of ``text`` (its words after
    ``$ clubwire``) and the one line it prints."""
    block = re.search(r"```console\n(.*?)```", text, re.S)
    assert block is not None
    lines = block[1].splitlines()
    return [(lines[i].split()[2:], lines[i + 1]) for i in range(0, len(lines), 2)]
