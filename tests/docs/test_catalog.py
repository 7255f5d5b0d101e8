"""docs/receiving-webhooks.md agrees with the code: the generated event catalog, and the
request it shows agrees with a real delivery."""

from __future__ import annotations

import json
import re

import click

from clubwire import cli
from clubwire.domain import event_catalog, event_schemas, ordering
from tests.docs import catalog, markdown
from tests.docs.conftest import World

DOC = catalog.DOC
REGENERATE = ".venv/bin/python -m tests.docs.catalog"
SIGNATURE = re.compile(r"t=[0-9]+,v1=[0-9a-f]{64}")


def _blocks(lang: str) -> list[markdown.Block]:
    return [b for b in markdown.blocks(DOC) if b.lang == lang]


def test_the_event_catalog_is_what_the_code_renders() -> None:
    committed = catalog.current(DOC.read_text(encoding="utf-8"))
    assert committed == catalog.render(), f"the event catalog is stale: run {REGENERATE}"


def test_the_catalog_says_each_kind_in_the_plain_words_of_the_endpoint_form() -> None:
    doc = DOC.read_text(encoding="utf-8")
    for kind, words in event_catalog.FOR_STAFF.items():
        assert words
        assert "\n" not in words
        assert not words.endswith(".")
        assert f"### `{kind}`\n\nIn plain words: *{words}*." in doc


def test_the_catalog_names_each_kinds_ordering_key_as_the_code_makes_it() -> None:
    doc = DOC.read_text(encoding="utf-8")
    assert set(ordering.RESOURCES) == set(event_catalog.KINDS) - {event_catalog.PING}
    for kind, resource in ordering.RESOURCES.items():
        section = doc.split(f"### `{kind}`\n", 1)[1].split("\n### ", 1)[0]
        line = f"Ordering key ([Events in order](#events-in-order)): {resource.in_words}."
        assert line in section
        key = event_schemas.example(kind)["orderingKey"]
        assert f'"orderingKey": "{key}"' in section


def test_events_in_order_tables_each_kinds_ordering_key() -> None:
    section = markdown.section(DOC, "## Events in order")
    for kind, resource in ordering.RESOURCES.items():
        assert f"| `{kind}` | {resource.in_words} |" in section


def test_the_catalog_has_every_kind_with_its_example_and_schema() -> None:
    json_blocks = [json.loads(b.text) for b in _blocks("json")]
    for kind in event_catalog.KINDS:
        assert f"### `{kind}`" in DOC.read_text(encoding="utf-8")
        assert event_schemas.example(kind) in json_blocks
        assert event_schemas.json_schemas()[kind] in json_blocks


def test_the_request_shown_is_a_real_delivery(world: World) -> None:
    (request,) = _blocks("http")
    head, _, body = request.text.partition("\n\n")
    shown = dict(line.split(": ", 1) for line in head.splitlines()[1:])
    real = world.delivery.headers
    assert head.startswith("POST ")
    assert set(shown) == {
        "Content-Type",
        "User-Agent",
        "X-Service-Event",
        "X-Service-Delivery",
        "X-Service-Signature",
    }
    assert {name: real[name] for name in ("Content-Type", "User-Agent")} == {
        name: shown[name] for name in ("Content-Type", "User-Agent")
    }
    assert SIGNATURE.fullmatch(real["X-Service-Signature"])
    assert shown["X-Service-Signature"].startswith("t=")
    assert re.fullmatch(r"dlv_[0-9A-Za-z]+", shown["X-Service-Delivery"])
    assert re.fullmatch(r"dlv_[0-9A-Za-z]+", real["X-Service-Delivery"])
    kind = shown["X-Service-Event"]
    assert (
        body.strip().encode()
        == json.dumps(
            event_schemas.example(kind), ensure_ascii=False, separators=(",", ":")
        ).encode()
    )
    assert real["X-Service-Event"] == json.loads(world.delivery.body)["event"]


def test_every_command_shown_exists() -> None:
    for doc in markdown.documents():
        for block in markdown.blocks(doc):
            if block.lang != "console":
                continue
            for line in block.text.splitlines():
                if line.startswith("$ clubwire "):
                    _check_command(line.removeprefix("$ ").split("#")[0].split()[1:], block)


def _check_command(args: list[str], block: markdown.Block) -> None:
    command: click.Command = cli.cli
    while isinstance(command, click.Group) and args and not args[0].startswith("-"):
        name = args.pop(0)
        found = command.commands.get(name)
        assert found is not None, f"{block.name}: no command {name!r}"
        command = found
    options = {opt for param in command.params for opt in getattr(param, "opts", [])}
    for arg in args:
        if arg.startswith("--"):
            assert arg.split("=")[0] in options, f"{block.name}: {command.name} has no {arg}"
