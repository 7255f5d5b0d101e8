"""The club data API, ``{base_url}/api/v1``, served at every club's base URL.

Requests are served by plain Starlette routes placed first in the app (ADR 0001: a FastAPI
sub-application per request halved the throughput). ``describe`` builds the FastAPI
application whose only use is to generate the public OpenAPI document from the same handler.
The listing is answered conditionally (``ETag``, ``If-None-Match``); a browser's CORS
preflight to any path of the API is refused with a problem saying why (keys are server-side
secrets), and no answer carries a CORS header.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Route
from starlette.types import Receive, Scope, Send

from clubwire import errors
from clubwire.domain import key_format, program_wire, rate_limits, scopes
from clubwire.domain.rate_limits import Standing
from clubwire.domain.recent import Recent
from clubwire.services.club_api import api_access
from clubwire.services.club_api.api_access import ApiAccess, ApiClient, Caller
from clubwire.settings import Settings
from clubwire.web import conditional, context, openapi, problems, telemetry

PROGRAMS_PATH = "/api/v1/programs"
DOCUMENT_PATH = "/api/v1/openapi.json"
PROGRAMS_EXAMPLE = {"data": program_wire.Program.model_config["json_schema_extra"]["examples"]}  # type: ignore[index]
CACHE_CONTROL = "private, no-cache"  # kept by the caller only, and checked again before each use
JSON = b"application/json"


class Programs:
    """``GET {base_url}/api/v1/programs``, answered conditionally (RFC 9110 §13.1.2).

    A plain ASGI app, the API's hot path (ADR 0001): the request's headers are read in one pass
    and the listing is sent as two messages, without Starlette's request and response objects.
    The listing's entity tag is computed once per cached listing: ``ApiAccess`` keeps each
    club's bytes per programs version, so a body that is not the object last seen for its
    club is a new listing. A 304 does the same work as a 200, but for sending the body.
    Tags are kept for as many clubs as ``ApiAccess`` keeps listings, the most recently
    used: a tag holds its listing's bytes (kept for every club ever served, they grew a
    serve process by the size of each new club's listing, bench/kept.py, issue 38).
    """

    def __init__(self, kept: int) -> None:
        self._tagged: Recent[str, _Tagged] = Recent(kept)  # club id → its listing's tag

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        answer = await self._answer(scope, _Presented.of(scope))
        await answer(scope, receive, send)

    async def _answer(self, scope: Scope, presented: _Presented) -> _Listing | Response:
        """The listing (or its 304), or the problem refusing it. The key is verified first:
        only a request whose key does not verify counts, and can be refused, as a failed
        authentication of its address (ADR 0009, session 20)."""
        running = context.of_scope(scope)
        access, limits = running.access, running.limits
        try:
            caller = await _authorized(scope, access, presented)
        except errors.Unauthenticated as error:
            return _counted(problems.problem(error), limits.failed(presented.address))
        except api_access.LacksScope as error:
            refused = error.caller
            return _counted(problems.problem(error), limits.take(refused.prefix, refused.club_id))
        standings = limits.take(caller.prefix, caller.club_id)
        over = rate_limits.refusing(standings)
        if over is not None:
            return limited_answer(over, standings)
        tagged = self._tag(caller.club_id, await access.programs_body(caller))
        unchanged = presented.if_none_match is not None and conditional.none_match(
            presented.if_none_match, tagged.tag
        )
        headers = [*(tagged.not_modified if unchanged else tagged.headers), *_fields(standings)]
        return _Listing(304, headers, b"") if unchanged else _Listing(200, headers, tagged.body)

    def _tag(self, club_id: str, body: bytes) -> _Tagged:
        known = self._tagged.get(club_id)
        if known is None or known.body is not body:
            known = _Tagged.of(body)
            self._tagged.keep(club_id, known)
        return known


@dataclass(frozen=True, slots=True)
class _Tagged:
    """A listing, its entity tag, and the headers its 200 and its 304 carry."""

    body: bytes
    tag: str
    headers: tuple[tuple[bytes, bytes], ...]
    not_modified: tuple[tuple[bytes, bytes], ...]

    @classmethod
    def of(cls, body: bytes) -> _Tagged:
        tag = conditional.entity_tag(body)
        cached = ((b"etag", tag.encode()), (b"cache-control", CACHE_CONTROL.encode()))
        entity = ((b"content-length", str(len(body)).encode()), (b"content-type", JSON))
        return cls(body, tag, entity + cached, cached)


@dataclass(frozen=True, slots=True)
class _Listing:
    """An answer with the listing, sent as it is: its headers are complete."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes

    async def __call__(self, _scope: Scope, _receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status, "headers": self.headers})
        await send({"type": "http.response.body", "body": self.body})


@dataclass(frozen=True, slots=True)
class _Presented:
    """What a request presents to the API, read from its headers in one pass."""

    authorization: str | None
    if_none_match: str | None  # its field lines joined with commas
    address: str
    user_agent: str | None

    @classmethod
    def of(cls, scope: Scope) -> _Presented:
        authorization = user_agent = None
        matches: list[str] = []
        for name, value in scope["headers"]:
            if name == b"authorization":
                authorization = value.decode("latin-1")
            elif name == b"user-agent":
                user_agent = value.decode("latin-1")
            elif name == b"if-none-match":
                matches.append(value.decode("latin-1"))
        client = scope.get("client")
        address = client[0] if client else "unknown"
        return cls(authorization, ", ".join(matches) or None, address, user_agent)

    def prefix(self) -> str | None:
        """The public prefix of the key presented, if it is key-shaped."""
        token = key_format.bearer_token(self.authorization)
        parsed = key_format.parse(token) if token is not None else None
        return parsed.prefix if parsed is not None else None


async def _authorized(scope: Scope, access: ApiAccess, presented: _Presented) -> Caller:
    """The caller, before anything else is looked at; the key's prefix goes to the log line."""
    try:
        caller = await access.authorize(
            scope["path_params"]["slug"],
            presented.authorization,
            scopes.READ_PROGRAMS,
            scope["query_string"],
            ApiClient(presented.address, presented.user_agent),
        )
    except errors.ClubwireError:
        scope[telemetry.KEY_PREFIX] = presented.prefix()
        raise
    scope[telemetry.KEY_PREFIX] = caller.prefix
    return caller


def _counted(refusal: Response, standings: Sequence[Standing]) -> Response:
    """``refusal``, telling where its caller stands with the limits it was counted under;
    or the 429 of the limit it is over."""
    over = rate_limits.refusing(standings)
    if over is not None:
        return limited_answer(over, standings)
    refusal.raw_headers.extend(_fields(standings))
    return refusal


def _fields(standings: Sequence[Standing]) -> list[tuple[bytes, bytes]]:
    fields = rate_limits.headers(standings).items()
    return [(name.lower().encode(), value.encode()) for name, value in fields]


def limited_answer(over: Standing, standings: Sequence[Standing]) -> Response:
    """The 429 for a request ``over`` a limit, saying which and when to come back, and where
    it stands with each of ``standings`` (``over`` among them)."""
    detail = TOO_MANY[over.policy.name]
    error = errors.TooManyRequests(detail.format(quota=over.policy.quota, seconds=over.window.left))
    response = problems.problem(error)
    response.raw_headers.extend(_fields(standings))
    return response


TOO_MANY_FAILURES = (
    "More than {quota} requests from your address failed to authenticate this minute, this "
    "one too: try again in {seconds} s. Requests with a valid API key are answered meanwhile."
)
TOO_MANY_REQUESTS = (
    "This API key has made its {quota} requests for this minute: try again in {seconds} s."
)
TOO_MANY_CLUB_REQUESTS = (
    "This club's API keys have made their {quota} requests for this minute, all together: "
    "try again in {seconds} s."
)
TOO_MANY = {
    rate_limits.PER_KEY: TOO_MANY_REQUESTS,
    rate_limits.PER_CLUB: TOO_MANY_CLUB_REQUESTS,
    rate_limits.AUTH_FAILURES: TOO_MANY_FAILURES,
}


async def refuse_preflight(_request: Request) -> Response:
    raise problems.CrossOriginRefused()


class _Route(Route):
    """A route that names itself in the scope (``scope["route"]``), as FastAPI's own do: the
    request's span reads its template there."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is not Match.NONE:
            child_scope["route"] = self
        return match, child_scope


class _Preflight(_Route):
    """A browser's CORS preflight (``OPTIONS`` with ``Origin`` and
    ``Access-Control-Request-Method``) to any path of the API; any other request passes by."""

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get("method") == "OPTIONS" and _PREFLIGHT.issubset(_names(scope["headers"])):
            return super().matches(scope)
        return Match.NONE, {}


def _names(headers: list[tuple[bytes, bytes]]) -> Iterator[bytes]:
    return (name for name, _ in headers)


_PREFLIGHT = frozenset({b"origin", b"access-control-request-method"})


def routes(settings: Settings, prefix: str) -> list[BaseRoute]:
    """The public API's routes under ``prefix`` (``/clubs/{slug}``, or empty by host name)."""
    described = describe()

    async def document(request: Request) -> Response:
        body = openapi.public_document(described, settings, request.path_params["slug"])
        return Response(body, media_type="application/json")

    return [
        _Route(prefix + PROGRAMS_PATH, Programs(settings.api_kept_listings), methods=["GET"]),
        _Route(prefix + DOCUMENT_PATH, document, methods=["GET"]),
        _Preflight(prefix + "/api/{path:path}", refuse_preflight, methods=["OPTIONS"]),
    ]


async def _list_programs() -> None:
    """The operation as FastAPI documents it; :class:`Programs` serves it."""


def describe() -> FastAPI:
    """The public API as FastAPI sees it, for its OpenAPI document only."""
    api = FastAPI(
        title="clubwire club data API",
        version="1.0",
        description=openapi.PUBLIC_DESCRIPTION,
        openapi_url=None,
    )
    api.add_api_route(
        PROGRAMS_PATH,
        _list_programs,
        methods=["GET"],
        operation_id="listPrograms",
        summary="List the club's programs",
        description=(
            "The club's active, non-private programs: what an anonymous visitor of its "
            "storefront sees. Ordered by start date, then name, then id. "
            "Needs the scope `read:programs`."
        ),
        tags=["programs"],
        response_class=Response,
        responses={
            200: {
                "description": "The programs",
                "model": program_wire.ProgramList,
                "content": {"application/json": {"example": PROGRAMS_EXAMPLE}},
                "headers": openapi.LISTING_HEADERS,
            },
            304: {
                "description": "Not modified: the listing is still the one `If-None-Match` "
                "names. No body.",
                "headers": openapi.LISTING_HEADERS,
            },
            **_limited_answers(problems.documented(401, 403, 429), openapi.RATE_LIMIT_HEADERS),
            **problems.documented(503),
        },
        openapi_extra={
            "security": [{openapi.API_KEY_SCHEME: []}],
            "parameters": [openapi.IF_NONE_MATCH],
        },
    )
    return api


def _limited_answers(
    answers: dict[int | str, dict[str, object]], headers: dict[str, object]
) -> dict[int | str, dict[str, object]]:
    """``answers`` documented with the rate-limit ``headers`` beside their own."""
    return {
        status: {**entry, "headers": {**dict(entry.get("headers") or {}), **headers}}  # type: ignore[call-overload]
        for status, entry in answers.items()
    }
