"""docs/api.md's conditional requests and its word on CORS show what the real server does: the
``ETag`` shown is the listing's, the 304 exchange is answered as shown, the curl and Python
examples download the listing once in two runs, and a browser's preflight is refused as the
Errors section shows."""

from __future__ import annotations

import http.client
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

from tests.docs import markdown
from tests.docs.conftest import World, require
from tests.docs.running import RUN_TIMEOUT

DOC = markdown.DOCS / "api.md"
PREFLIGHT = {"Origin": "https://granite.example", "Access-Control-Request-Method": "GET"}


def _block(lang: str, needle: str, start: str = "") -> markdown.Block:
    (found,) = [
        b
        for b in markdown.blocks(DOC)
        if b.lang == lang and needle in b.text and b.text.startswith(start)
    ]
    return found


def _section(title: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end >= 0 else None]


def _exchange(world: World, method: str, path: str, headers: dict[str, str]) -> str:
    """The answer as an ``http`` block shows it: status line, every header, a blank line, body."""
    parts = urlsplit(world.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(method, path, headers=headers)
        response = connection.getresponse()
        body = response.read().decode()
    finally:
        connection.close()
    lines = [f"{name}: {value}" for name, value in response.getheaders()]
    return "\n".join([f"HTTP/1.1 {response.status} {response.reason}", *lines, "", body])


def _head(text: str) -> tuple[str, dict[str, str], str]:
    head, _, body = text.strip("\n").partition("\n\n")
    status, *lines = head.splitlines()
    fields = dict(line.split(": ", 1) for line in lines)
    return status, {name.lower(): value for name, value in fields.items()}, body


def _shown_matches(shown: str, real: str) -> None:
    status, headers, body = _head(shown)
    real_status, real_headers, real_body = _head(real)
    assert status == real_status, real
    assert {name: real_headers.get(name) for name in headers} == headers, real
    assert body == real_body, real


def test_the_tag_shown_is_the_listings(world: World) -> None:
    listing = _exchange(world, "GET", "/clubs/granite/api/v1/programs", world_key(world))
    _, headers, _ = _head(listing)
    shown = _block("http", "Cache-Control: private, no-cache", start="ETag: ").text
    assert dict(line.split(": ", 1) for line in shown.strip().splitlines()) == {
        "ETag": headers["etag"],
        "Cache-Control": headers["cache-control"],
    }


def test_the_304_exchange_is_answered_as_shown(world: World) -> None:
    exchange = _block("http", "If-None-Match:").text
    request, _, shown = exchange.partition("\n\nHTTP/1.1 ")
    request_line, *lines = request.splitlines()
    method, path, _ = request_line.split()
    sent = dict(line.split(": ", 1) for line in lines)
    assert sent["Authorization"].startswith("Bearer cw_live_")
    sent["Authorization"] = world_key(world)["Authorization"]
    real = _exchange(world, method, path, sent)
    assert real.startswith("HTTP/1.1 304 Not Modified\n")
    _shown_matches("HTTP/1.1 " + shown, real)


def test_a_browser_preflight_is_refused_as_shown(world: World) -> None:
    shown = _block("http", "cors_not_supported").text
    real = _exchange(world, "OPTIONS", "/clubs/granite/api/v1/programs", PREFLIGHT)
    _shown_matches(shown, real)
    assert "access-control-" not in real.lower()


def test_the_errors_table_and_the_cors_section_name_the_refusal() -> None:
    assert "| 403 | `cors_not_supported` |" in _section("Errors")
    cors = _section("Browsers and CORS")
    assert "server-side secret" in cors
    assert "`cors_not_supported`" in cors
    assert "your site's server" in cors


def test_curl_downloads_the_listing_once_in_two_runs(
    world: World, example_env: dict[str, str], tmp_path: Path
) -> None:
    require("curl")
    script = _block("sh", "--etag-compare").text
    printed = _run(["bash", "-euo", "pipefail", "-c", script], tmp_path, example_env)
    assert printed == _block("text", "second: 304").text
    assert (tmp_path / "programs.json").read_bytes().startswith(b'{"data":[{')


def test_python_downloads_the_listing_once_in_two_runs(
    example_env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "poll.py").write_text(_block("python", "If-None-Match").text, encoding="utf-8")
    printed = [_run([sys.executable, "poll.py"], tmp_path, example_env) for _ in range(2)]
    assert printed == ["updated: 2 programs\n", "unchanged: 2 programs\n"]
    assert re.fullmatch(r'"[0-9a-f]{32}"', (tmp_path / "programs.etag").read_text())


def _run(command: list[str], folder: Path, env: dict[str, str]) -> str:
    """What ``command`` printed, run in ``folder``; it must succeed."""
    done = subprocess.run(
        command,
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def world_key(world: World) -> dict[str, str]:
    return {"Authorization": f"Bearer {world.key}"}
