"""Every code example in README.md and docs/*.md runs (the convention: tests/docs/markdown.py).

``python`` and ``js`` blocks run one by one; a document's ``sh`` blocks run together as one
script (docs/operations.md's against PostgreSQL, in test_operations.py). A ``receiver`` block
must accept a real signed delivery, and a copy of it, and refuse forged and stale ones. The
receivers' guide's traced receiver must join the trace of a real traced delivery.
"""

from __future__ import annotations

import base64
import http.client
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clubwire import receiving, settings, signing
from clubwire.cli import demo
from clubwire.domain import event_catalog, standard_signing
from tests.docs import markdown
from tests.docs.conftest import WEBHOOK_PATH, World, require
from tests.docs.running import RUN_TIMEOUT, run_shell, workdir
from tests.ports import free_port

START_TIMEOUT = 20.0
FORWARDED = ("Content-Type", "User-Agent", "X-Service-Event", "X-Service-Delivery")
SIGNED = (signing.HEADER, *standard_signing.HEADERS)

SHELL_ELSEWHERE = {"operations.md": "runs against PostgreSQL in test_operations.py"}
TRACED_RECEIVER = "traced_receiver.py"  # docs/receiving-webhooks.md, "Traces: `traceparent`"
# Runs the guide's ``handle`` on a delivery's headers and event (argv), and prints the span it
# made: its trace id and its parent's span id.
JOIN = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
import traced_receiver
spans = InMemorySpanExporter()
trace.get_tracer_provider().add_span_processor(SimpleSpanProcessor(spans))
traced_receiver.handle(json.loads(sys.argv[1]), json.loads(sys.argv[2]))
(span,) = spans.get_finished_spans()
print(json.dumps({"name": span.name, "trace_id": f"{span.context.trace_id:032x}",
                  "parent_id": f"{span.parent.span_id:016x}"}))
"""


def _scripts() -> list[markdown.Block]:
    return [b for b in markdown.all_blocks() if b.runnable and b.lang not in markdown.SHELL]


def _shell_documents() -> list[Path]:
    return [
        doc
        for doc in markdown.documents()
        if doc.name not in SHELL_ELSEWHERE
        and any(b.lang in markdown.SHELL for b in markdown.blocks(doc))
    ]


SCRIPTS = _scripts()


def command(block: markdown.Block) -> list[str]:
    if block.lang in markdown.NODE:
        return [require("node"), block.script_name]
    return [sys.executable, block.script_name]


def test_every_block_has_a_language() -> None:
    unlabelled = [b.name for b in markdown.all_blocks() if not b.lang]
    assert unlabelled == [], "give these blocks a language (see tests/docs/markdown.py)"


def test_the_guides_have_examples_in_every_language() -> None:
    langs = {b.lang for b in SCRIPTS if b.receiver}
    assert {"python", "js"} <= langs
    assert len([b for b in SCRIPTS if b.receiver]) >= 3


@pytest.mark.parametrize("block", SCRIPTS, ids=[b.name for b in SCRIPTS])
def test_example_runs(
    block: markdown.Block, world: World, example_env: dict[str, str], tmp_path: Path
) -> None:
    folder = workdir(block.doc, tmp_path)
    # A delivery saved where and as the demo keeps its latest one (check-delivery.mjs).
    saved = folder / settings.HOME / demo.LAST_DELIVERY
    receiving.keep(saved, world.delivery.body, world.delivery.headers[signing.HEADER])
    if block.receiver:
        check_receiver(block, folder, world, example_env)
        return
    _ran(command(block), folder, example_env)


def _ran(
    args: list[str], folder: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``args`` run in ``folder``, which must succeed."""
    done = subprocess.run(
        args,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"{args[0]} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.parametrize(
    "doc", _shell_documents(), ids=[d.name for d in _shell_documents()] or None
)
def test_shell_examples_run(doc: Path, example_env: dict[str, str], tmp_path: Path) -> None:
    output = run_shell(doc, example_env, tmp_path)
    assert output.strip(), f"the shell examples of {doc.name} printed nothing"


def test_the_traced_receiver_joins_the_deliverys_trace(world: World, tmp_path: Path) -> None:
    """The guide's ``handle``, given a real delivery's headers, makes its span a child of the
    attempt's ``POST`` span, in the event's trace, as the collector got them."""
    (doc,) = {b.doc for b in markdown.all_blocks() if b.file == TRACED_RECEIVER}
    folder = workdir(doc, tmp_path)
    (folder / "join.py").write_text(JOIN, encoding="utf-8")
    headers = world.delivery.headers
    event = json.loads(world.delivery.body)
    done = _ran([sys.executable, "join.py", json.dumps(headers), json.dumps(event)], folder)
    joined = json.loads(done.stdout)
    _, trace_id, span_id, _ = headers["traceparent"].split("-")
    made = {"name": f"handle {event['event']}", "trace_id": trace_id, "parent_id": span_id}
    assert joined == made
    spans = world.collector.wait_for(lambda spans: any(s.span_id == span_id for s in spans))
    (post,) = (span for span in spans if span.span_id == span_id)
    assert (post.name, post.kind, post.trace_id) == ("POST", "SPAN_KIND_CLIENT", trace_id)


# --------------------------------------------------------------------------- receivers


def check_receiver(block: markdown.Block, folder: Path, world: World, env: dict[str, str]) -> None:
    port = free_port()
    with running(block, folder, {**env, "PORT": str(port)}) as output:
        for case, (signatures, body, accepted) in forged_deliveries(world).items():
            status, answer = post(port, signatures, body, world)
            verdict = 200 <= status < 300 if accepted else 400 <= status < 500
            assert verdict, (
                f"{block.name}: {case}: answered {status} {answer!r}\n{output.read_text()}"
            )


Signatures = dict[str, str]  # X-Service-Signature and the webhook-* headers


def forged_deliveries(world: World) -> dict[str, tuple[Signatures, bytes, bool]]:
    """Case → (signature headers of both schemes, body, whether a correct receiver accepts
    it); each case is the same for either scheme, so a receiver may verify either."""
    real = {name: world.delivery.headers[name] for name in SIGNED}
    body = world.delivery.body
    t = int(real[signing.HEADER].partition(",")[0].removeprefix("t="))
    v1 = real[signing.HEADER].partition("v1=")[2]
    now = int(time.time())
    tampered = body.replace(b'"status":"active"', b'"status":"waitlisted"', 1)
    assert tampered != body
    other = f"v1,{base64.b64encode(bytes(32)).decode()}"
    several = {
        signing.HEADER: f"t={t},v1={'0' * 64},v1={v1}",
        standard_signing.SIGNATURE_HEADER: f"{other} {real[standard_signing.SIGNATURE_HEADER]}",
    }
    malformed = {signing.HEADER: "garbage", standard_signing.SIGNATURE_HEADER: "garbage"}
    unsigned = {name: value for name, value in real.items() if name not in several}
    return {
        "the real delivery": (real, body, True),
        "the same delivery again": (real, body, True),
        "several v1 values, one right": ({**real, **several}, body, True),
        "a tampered body": (real, tampered, False),
        "another secret": (signed("whsec_" + "x" * 32, now, body), body, False),
        "a stale timestamp": (signed(world.secret, now - 301, body), body, False),
        "malformed signatures": ({**real, **malformed}, body, False),
        "no signature": (unsigned, body, False),
    }


def signed(secret: str, timestamp: int, body: bytes) -> Signatures:
    """Both schemes' headers for ``body``, as clubwire would sign it with ``secret``."""
    event_id = event_catalog.id_of(body)
    assert event_id is not None
    return {
        signing.HEADER: signing.sign(secret, timestamp, body),
        **standard_signing.headers(secret, event_id, timestamp, body),
    }


def post(port: int, signatures: Signatures, body: bytes, world: World) -> tuple[int, bytes]:
    headers = {name: world.delivery.headers[name] for name in FORWARDED} | signatures
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", WEBHOOK_PATH, body, headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


@contextmanager
def running(block: markdown.Block, folder: Path, env: dict[str, str]) -> Iterator[Path]:
    """The receiver, started and answering on ``$PORT`` until the block ends."""
    output = folder / f"{block.script_name}.log"
    with output.open("wb") as sink:
        process = subprocess.Popen(
            command(block), cwd=folder, env=env, stdout=sink, stderr=subprocess.STDOUT
        )
    try:
        wait_until_listening(process, int(env["PORT"]), output)
        yield output
        assert process.poll() is None, f"{block.name} exited:\n{output.read_text()}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def wait_until_listening(process: subprocess.Popen[bytes], port: int, output: Path) -> None:
    import socket

    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"the receiver exited with {process.returncode}:\n{output.read_text()}")
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    pytest.fail(f"the receiver did not listen within {START_TIMEOUT} s:\n{output.read_text()}")
