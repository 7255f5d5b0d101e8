"""Running a document's examples: a folder holding its blocks, and its ``sh`` blocks as one
script (the convention: ``tests/docs/markdown.py``). Shared by the docs tests that run them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.docs import markdown
from tests.docs.conftest import require

RUN_TIMEOUT = 60.0


def workdir(doc: Path, folder: Path) -> Path:
    """A folder holding every block of ``doc`` under its script name."""
    folder.mkdir(parents=True, exist_ok=True)
    for block in markdown.blocks(doc):
        if block.runnable:
            (folder / block.script_name).write_text(block.text, encoding="utf-8")
    return folder


def run_shell(doc: Path, env: dict[str, str], folder: Path, timeout: float = RUN_TIMEOUT) -> str:
    """The ``sh`` blocks of ``doc`` as one script; fails the test if it fails."""
    if any("curl " in b.text for b in markdown.blocks(doc) if b.lang in markdown.SHELL):
        require("curl")
    script = "\n".join(b.text for b in markdown.blocks(doc) if b.lang in markdown.SHELL)
    path = workdir(doc, folder) / "examples.sh"
    path.write_text(script, encoding="utf-8")
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", str(path)],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = process.communicate(timeout=timeout)
    finally:
        _stop_group(process)
    assert process.returncode == 0, f"the shell examples of {doc.name} failed:\n{output}"
    return output


def _stop_group(process: subprocess.Popen[str]) -> None:
    """End what the script left running: its own process group, started by this test."""
    import os
    import signal

    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)
