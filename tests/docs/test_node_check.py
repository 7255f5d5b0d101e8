"""The Node.js check that ``make demo`` writes beside the delivery it keeps (issue 14, item 4):
the package's files are the guide's text, and the check runs from anywhere as the demo
prints it, with nothing but ``node``."""

from __future__ import annotations

import subprocess
from importlib import resources
from pathlib import Path

import pytest

from clubwire import receiving, signing
from clubwire.cli import demo
from tests.docs import markdown
from tests.docs.conftest import World, require
from tests.docs.running import RUN_TIMEOUT

GUIDE = markdown.DOCS / "receiving-webhooks.md"


@pytest.mark.parametrize("name", receiving.NODE_FILES)
def test_the_shipped_file_is_the_guides_example(name: str) -> None:
    (block,) = [b for b in markdown.blocks(GUIDE) if b.file == name]
    shipped = (resources.files("clubwire") / "node" / name).read_text(encoding="utf-8")
    assert shipped == block.text


def _check(world: World, env: dict[str, str], home: Path, secret: str) -> str:
    """Run the check as the demo prints it, from a folder that holds nothing else."""
    kept = home / demo.LAST_DELIVERY
    receiving.keep(kept, world.delivery.body, world.delivery.headers[signing.HEADER])
    check = receiving.keep_node_check(kept.parent)
    elsewhere = home / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [require("node"), str(check), str(kept)],
        cwd=elsewhere,
        env={**env, "WEBHOOK_SECRET": secret},
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    return f"{done.returncode}\n{done.stdout}{done.stderr}"


def test_the_check_written_beside_a_kept_delivery_verifies_it(
    world: World, example_env: dict[str, str], tmp_path: Path
) -> None:
    output = _check(world, example_env, tmp_path, world.secret)
    assert output.startswith("0\nverified registration.created evt_"), output


def test_the_check_refuses_another_secret(
    world: World, example_env: dict[str, str], tmp_path: Path
) -> None:
    output = _check(world, example_env, tmp_path, "whsec_" + "x" * 32)
    assert not output.startswith("0\n")
    assert "no v1 signature matches" in output
