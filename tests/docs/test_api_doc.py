"""docs/api.md shows what the real server answers: the program list, and every error exactly
(status line, the headers shown, and the body), each error case the service has included;
and the key format it publishes (the regular expression and the checksum) is the real one."""

from __future__ import annotations

import http.client
import json
import re
import zlib
from http import HTTPStatus
from urllib.parse import urlsplit

import psycopg
import pytest
from sqlalchemy import create_engine
from sqlalchemy.orm import Session
from starlette.responses import Response

from clubwire import ids
from clubwire.domain import base62, key_format, rate_limits
from clubwire.domain.rate_limits import Policy, Standing, Window
from clubwire.services import clubs
from clubwire.services.club_api import keys
from clubwire.web import problems, public_api
from tests.docs import markdown
from tests.docs.conftest import SLUG, World
from tests.factories import EPOCH

DOC = markdown.DOCS / "api.md"
PROGRAMS = f"/clubs/{SLUG}/api/v1/programs"


def _blocks(lang: str) -> list[markdown.Block]:
    return [b for b in markdown.blocks(DOC) if b.lang == lang]


def _request(
    world: World, key: str | None, path: str = PROGRAMS, method: str = "GET"
) -> http.client.HTTPResponse:
    parts = urlsplit(world.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    headers = {} if key is None else {"Authorization": key}
    connection.request(method, path, headers=headers)
    response = connection.getresponse()
    response.read()
    connection.close()
    return response


def _answer(
    world: World,
    key: str | None,
    path: str = PROGRAMS,
    method: str = "GET",
    extra: dict[str, str] | None = None,
) -> str:
    """The answer as an ``http`` block shows it: status line, then every header, then body."""
    parts = urlsplit(world.url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    sent = {} if key is None else {"Authorization": key}
    connection.request(method, path, headers={**sent, **(extra or {})})
    response = connection.getresponse()
    body = response.read().decode()
    connection.close()
    headers = "\n".join(f"{name}: {value}" for name, value in response.getheaders())
    return f"HTTP/1.1 {response.status} {response.reason}\n{headers}\n\n{body}"


def _answers_shown() -> list[markdown.Block]:
    answers = [b for b in _blocks("http") if b.text.startswith("HTTP/1.1 ")]
    assert len(answers) >= 10
    return answers


def _answered(exc: Exception) -> str:
    """The answer to an exception no handler took, as an ``http`` block shows it."""
    return _shown_as(problems.answer(exc))


def _shown_as(response: Response) -> str:
    headers = "\n".join(f"{name}: {value}" for name, value in response.headers.items())
    status = f"{response.status_code} {HTTPStatus(response.status_code).phrase}"
    return f"HTTP/1.1 {status}\n{headers}\n\n{bytes(response.body).decode()}"


PER_KEY = Policy(rate_limits.PER_KEY, 600)
PER_CLUB = Policy(rate_limits.PER_CLUB, 1800)
AUTH_FAILURES = Policy(rate_limits.AUTH_FAILURES, 60)


def _over(*used: tuple[Policy, int]) -> str:
    """The answer past one of these policies' quotas, where each stands with the requests
    ``used``, 42 seconds before the window ends (the server answers so: reaching the quota
    for real takes the docs' world out for a minute)."""
    standings = [Standing(policy, count, Window(0, 42)) for policy, count in used]
    refusing = rate_limits.refusing(standings)
    assert refusing is not None
    return _shown_as(public_api.limited_answer(refusing, standings))


@pytest.fixture(scope="module")
def expired_key(world: World) -> str:
    """A key of granite's made at EPOCH to expire 30 days later: long expired."""
    engine = create_engine(f"sqlite:///{world.folder / 'clubwire.db'}")
    try:
        with Session(engine) as session, session.begin():
            granite = clubs.get_club(session, SLUG)
            _, value = keys.create_key(session, granite, ["read:programs"], "Season", EPOCH, "30d")
    finally:
        engine.dispose()
    return value


def _mistyped(key: str) -> str:
    """``key`` with one character of its secret changed: its checksum fails."""
    at = len(key) - 10
    return key[:at] + ("A" if key[at] != "A" else "B") + key[at + 1 :]


def _cases(world: World, expired_key: str) -> dict[str, str]:
    bearer = f"Bearer {world.key}"
    never_made = key_format.generate(ids.random_base62).value
    return {
        "no key": _answer(world, None),
        "key in the URL": _answer(world, None, f"{PROGRAMS}?api_key={world.key}"),
        "not a key": _answer(world, "Bearer hello"),
        "checksum fails": _answer(world, f"Bearer {_mistyped(world.key)}"),
        "unknown key": _answer(world, f"Bearer {never_made}"),
        "another club's key": _answer(world, f"Bearer {world.other_club_key}"),
        "revoked": _answer(world, f"Bearer {world.revoked_key}"),
        "expired": _answer(world, f"Bearer {expired_key}"),
        "module off": _answer(
            world, f"Bearer {world.module_off_key}", "/clubs/slate/api/v1/programs"
        ),
        "no scope": _answer(world, f"Bearer {world.games_only_key}"),
        "no such path": _answer(world, bearer, f"/clubs/{SLUG}/api/v1/members"),
        "wrong method": _answer(world, bearer, PROGRAMS, "POST"),
        "browser preflight": _answer(
            world,
            None,
            PROGRAMS,
            "OPTIONS",
            {"Origin": "https://granite.example", "Access-Control-Request-Method": "GET"},
        ),
        "nul in the URL": _answer(world, bearer, f"/clubs/{SLUG}%00/api/v1/programs"),
        "over a key's limit": _over((PER_KEY, 601), (PER_CLUB, 600)),
        "over a club's limit": _over((PER_KEY, 450), (PER_CLUB, 1801)),
        "over an address's limit": _over((AUTH_FAILURES, 61)),
        "server fault": _answered(RuntimeError("shown in the docs")),
        "database down": _answered(psycopg.OperationalError("connection failed")),
    }


def _parse(answer: str) -> tuple[str, dict[str, str], object]:
    head, _, body = answer.partition("\n\n")
    status, *lines = head.splitlines()
    headers = dict(line.split(": ", 1) for line in lines)
    return status, {name.lower(): value for name, value in headers.items()}, json.loads(body)


def _shown(block: markdown.Block) -> tuple[str, dict[str, str], object]:
    return _parse(block.text.strip())


def _matches(shown: tuple[str, dict[str, str], object], real: str) -> bool:
    status, headers, body = shown
    real_status, real_headers, real_body = _parse(real)
    same_headers = all(real_headers.get(name) == value for name, value in headers.items())
    return status == real_status and same_headers and body == real_body


def test_every_error_shown_is_what_the_server_answers(world: World, expired_key: str) -> None:
    answers = _cases(world, expired_key)
    for block in _answers_shown():
        shown = _shown(block)
        assert any(_matches(shown, real) for real in answers.values()), (
            f"{block.name} is not what the server answers:\n{block.text}\n\n"
            + "\n\n".join(answers.values())
        )


def test_every_error_case_is_shown(world: World, expired_key: str) -> None:
    shown = [_shown(b) for b in _answers_shown()]
    for case, real in _cases(world, expired_key).items():
        assert any(_matches(s, real) for s in shown), f"no example of {case}:\n{real}"
        if _parse(real)[1].get("www-authenticate"):
            assert any(_matches(s, real) and "www-authenticate" in s[1] for s in shown)


def test_the_program_list_shown_is_what_the_server_answers(world: World) -> None:
    example = _blocks("json")[0]  # the first: the others are the internal API's erasure
    answer = _answer(world, f"Bearer {world.key}")
    status, headers, body = _parse(answer)
    assert status == "HTTP/1.1 200 OK"
    assert headers["content-type"] == "application/json"
    assert json.loads(example.text) == body


@pytest.mark.parametrize("method", ["GET", "HEAD"])
def test_the_methods_named_are_served(world: World, method: str) -> None:
    assert _request(world, f"Bearer {world.key}", method=method).status == 200


def test_the_example_keys_have_the_real_shape_and_checksum() -> None:
    text = DOC.read_text(encoding="utf-8")
    shown = set(re.findall(r"cw_live_[0-9A-Za-z]+_[0-9A-Za-z]+", text))
    shown.remove(_worked_example()["before the checksum"])
    assert shown
    for key in shown:
        parsed = key_format.parse(key)
        assert parsed is not None, key
        assert len(parsed.secret) == key_format.SECRET_LENGTH, f"{key} is not a new key"
        assert key_format.checksum_holds(parsed), key


def _published_pattern() -> str:
    (block,) = [b for b in _blocks("text") if "cw_live_[" in b.text]
    return block.text.strip()


def test_the_published_pattern_is_the_one_keys_are_parsed_with(world: World) -> None:
    pattern = _published_pattern()
    assert pattern == key_format.PATTERN
    assert re.findall(pattern, f"API_KEY='{world.key}'\n") == [world.key]
    assert re.fullmatch(pattern, world.key[:-1]) is None


def _worked_example() -> dict[str, str]:
    (block,) = [b for b in _blocks("text") if "CRC32" in b.text]
    lines = (re.split(r"\s{2,}", line, maxsplit=1) for line in block.text.strip().splitlines())
    return {name: value for name, value in lines}


def test_the_worked_checksum_example_recomputes() -> None:
    shown = _worked_example()
    body = shown["before the checksum"]
    crc = zlib.crc32(body.encode())
    assert shown["CRC32"] == f"0x{crc:08x} = {crc}"
    digits = [int(d) for d in re.findall(r"(\d+)(?:·62[⁰-⁹]*)?", shown["in base 62"])]
    assert sum(d * 62**i for i, d in enumerate(reversed(digits))) == crc
    assert len(digits) == key_format.CHECKSUM_LENGTH
    assert shown["checksum"] == key_format.checksum(body)
    assert "".join(base62.ALPHABET[d] for d in digits) == shown["checksum"]
    assert shown["the key"] == body + shown["checksum"]
    parsed = key_format.parse(shown["the key"])
    assert parsed is not None
    assert key_format.checksum_holds(parsed)
    assert re.fullmatch(_published_pattern(), shown["the key"])


def test_the_rate_limit_fields_shown_are_what_a_key_is_told(world: World) -> None:
    (block,) = [b for b in _blocks("http") if b.text.startswith("RateLimit-Policy")]
    shown = dict(line.split(": ", 1) for line in block.text.strip().splitlines())
    real = _parse(_answer(world, f"Bearer {world.key}"))[1]
    assert real["ratelimit-policy"] == shown["RateLimit-Policy"]
    assert re.fullmatch(r'"per-key";r=\d+;t=(\d+), "per-club";r=\d+;t=\1', real["ratelimit"])
    assert re.fullmatch(r'"per-key";r=599;t=(\d+), "per-club";r=1799;t=\1', shown["RateLimit"])
