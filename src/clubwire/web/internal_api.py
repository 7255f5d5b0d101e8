"""The host platform's API, ``/internal/v1``: sync clubs, the module switch and programs;
publish events; replay an endpoint's deliveries; erase a member."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Depends, Header, Path, Request, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, StrictBool
from pydantic.alias_generators import to_camel
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from clubwire import errors
from clubwire.domain import (
    event_batches,
    event_catalog,
    personal_data,
    program_wire,
    replay_window,
    slugs,
    text,
)
from clubwire.services import clubs, programs
from clubwire.services.delivery import batches, events, replays, subscriptions
from clubwire.services.personal_data import erasures
from clubwire.settings import Settings
from clubwire.storage import models
from clubwire.web import bearer, context, openapi, problems

Slug = Annotated[str, Path(pattern=slugs.SLUG_PATTERN, examples=["granite-curling-club"])]
ProgramIdPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")]
EndpointIdPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9_]{1,64}$", examples=["we_7kQ2mX"])]
T = TypeVar("T")


class _Out(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, validate_by_name=True)


class ClubIn(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_name=True)
    name: Annotated[
        text.NameText,
        Field(min_length=1, max_length=200, examples=["Granite Curling Club"]),
    ]
    payload_days: Annotated[
        Annotated[int, Field(ge=1), BeforeValidator(program_wire.json_number)] | None,
        Field(
            examples=[7],
            description="Keep event payloads for this many days, at most "
            "CLUBWIRE_RETENTION_DAYS (422 beyond it); null: as long as the history. Left "
            "out: unchanged (a new club keeps them as long as the history).",
        ),
    ] = None


class ModuleIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    enabled: StrictBool  # true or false: not 0, 1 or "yes"


class EventIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    event: Annotated[str, Field(examples=["registration.created"], description="The event kind.")]
    data: Annotated[
        dict[str, Any], Field(description="The payload; its shape depends on the kind.")
    ]


class EventOut(_Out):
    id: Annotated[str, Field(examples=["evt_4Fh2kQ9xTbV3rYl0ngS3"])]
    ordering_key: Annotated[
        str | None,
        Field(
            examples=["invoice:inv_8812"],
            description="The resource the event is about, as its envelope's orderingKey says "
            "(null for none).",
        ),
    ] = None
    sequence: Annotated[
        int | None,
        Field(
            examples=[2],
            description="Its place among the club's events of that key: 1, 2, 3, … with no "
            "gaps, in the order they were published.",
        ),
    ] = None


class BatchEventOut(EventOut):
    repeated: Annotated[
        bool,
        Field(
            description="Its idempotency key was used before (by an earlier request, or "
            "earlier in this batch): this is that event, and nothing new was made."
        ),
    ]


class EventBatchOut(BaseModel):
    events: Annotated[
        list[BatchEventOut], Field(description="The batch's events, in the order sent.")
    ]


class ReplayIn(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, validate_by_name=True)
    since: Annotated[
        str,
        Field(
            json_schema_extra={"pattern": replay_window.MINUTE_PATTERN},
            examples=["2026-01-05T12:00Z"],
            description="From this time, to the minute (included); UTC unless an offset "
            "is given. Before until.",
        ),
    ]
    until: Annotated[
        str,
        Field(
            json_schema_extra={"pattern": replay_window.MINUTE_PATTERN},
            examples=["2026-01-05T13:00Z"],
            description="To this time, to the minute (not included).",
        ),
    ]
    statuses: Annotated[
        list[str],
        Field(
            max_length=len(replay_window.STATUSES),
            json_schema_extra={"items": {"enum": list(replay_window.STATUSES)}},
            description="The statuses to replay; empty or left out: dead and skipped.",
        ),
    ] = []
    events: Annotated[
        list[str],
        Field(
            max_length=len(event_catalog.SUBSCRIBABLE),
            json_schema_extra={"items": {"enum": list(event_catalog.SUBSCRIBABLE)}},
            description="The event kinds to replay; empty or left out: every kind.",
        ),
    ] = []
    dry_run: Annotated[
        StrictBool, Field(description="Count what would be replayed; send nothing.")
    ] = False


class ReplayOut(_Out):
    count: Annotated[int, Field(description="Deliveries replayed (or, dry run, to be).")]
    matching: Annotated[int, Field(description="Deliveries in the window that can be replayed.")]
    capped: Annotated[
        bool, Field(description="More than CLUBWIRE_REPLAY_LIMIT: replay again for the rest.")
    ]
    withheld: Annotated[
        int,
        Field(
            description="Deliveries of the window never sent again: their payload was erased "
            "at a member's request or has expired."
        ),
    ]
    dry_run: bool


class ErasureCounts(BaseModel):
    events: Annotated[int, Field(description="Event bodies with the member's fields replaced.")]
    deliveries: Annotated[
        int, Field(description="Deliveries not yet delivered, now skipped as erased.")
    ]
    attempts: Annotated[
        int, Field(description="Attempts whose recorded answer, error or Retry-After quoted them.")
    ]
    emails: Annotated[int, Field(description="Emails of the outbox that quoted them.")]
    flashes: Annotated[int, Field(description="Messages of the settings area that quoted them.")]


class ErasureOut(_Out):
    id: Annotated[str | None, Field(description="The erasure's record; null for a dry run.")]
    club: str
    requested_by: Annotated[str, Field(examples=["platform"])]
    matched_by: Annotated[list[str], Field(examples=[["email", "member_id"]])]
    started_at: str
    finished_at: str
    dry_run: bool
    counts: ErasureCounts


class ClubOut(_Out):
    id: str
    slug: str
    name: str
    webhooks_enabled: bool
    payload_days: Annotated[
        int | None, Field(description="Days event payloads are kept; null: as the history.")
    ]
    base_url: str
    created_at: str
    updated_at: str

    @classmethod
    def of(cls, club: models.Club, settings: Settings) -> ClubOut:
        return cls.model_validate(clubs.describe(club, settings.club_base_url(club.slug)))


class ProgramOut(program_wire.Program):
    private: bool

    @classmethod
    def of(cls, program: models.Program) -> ProgramOut:
        return cls.model_validate({**program_wire.to_wire(program), "private": program.private})


def router() -> APIRouter:
    """The internal API's routes, behind ``Authorization: Bearer <CLUBWIRE_PLATFORM_TOKEN>``."""
    api = APIRouter(
        prefix="/internal/v1",
        tags=["internal"],
        dependencies=[Depends(_platform_guard)],
        responses=problems.documented(401, 403, 404, 422, 503),
    )
    secured: dict[str, Any] = {"openapi_extra": {"security": [{openapi.PLATFORM_SCHEME: []}]}}
    # A body may be too large (CLUBWIRE_MAX_REQUEST_BYTES) or not UTF-8 JSON at all.
    with_body = {**secured, "responses": problems.documented(400, 413)}
    api.add_api_route(
        "/clubs/{slug}",
        put_club,
        methods=["PUT"],
        summary="Create or rename a club",
        **_created_or_replaced(with_body, ClubOut),
    )
    api.add_api_route(
        "/clubs/{slug}/modules/webhooks",
        put_module,
        methods=["PUT"],
        summary="Switch the Webhooks & API module",
        **with_body,
    )
    api.add_api_route(
        "/clubs/{slug}/programs/{program_id}",
        put_program,
        methods=["PUT"],
        summary="Create or replace a program",
        **_created_or_replaced(with_body, ProgramOut),
    )
    api.add_api_route(
        "/clubs/{slug}/events",
        publish_event,
        methods=["POST"],
        summary="Publish an event to the club's subscribed endpoints",
        status_code=201,
        responses={
            200: {"description": "A repeat of an earlier Idempotency-Key", "model": EventOut},
            **problems.documented(400, 409, 413),
        },
        **secured,
    )
    api.add_api_route(
        "/clubs/{slug}/events/batch",
        publish_events,
        methods=["POST"],
        summary="Publish up to 100 events at once, all or none",
        description=BATCH_DESCRIPTION,
        status_code=201,
        response_model=EventBatchOut,
        responses={
            200: {"description": "Every event a repeat of an earlier one", "model": EventBatchOut},
            **problems.documented(400, 409, 413),
        },
        **secured,
    )
    api.add_api_route(
        "/clubs/{slug}/endpoints/{endpoint_id}/replays",
        replay,
        methods=["POST"],
        summary="Replay an endpoint's deliveries of a time range",
        description=REPLAY_DESCRIPTION,
        responses=problems.documented(400, 409, 413),
        **secured,
    )
    api.add_api_route(
        "/clubs/{slug}/erasures",
        erase_member,
        methods=["POST"],
        summary="Erase a member's personal data",
        description=ERASURE_DESCRIPTION,
        status_code=201,
        responses={
            200: {"description": "A dry run: what would change", "model": ErasureOut},
            **problems.documented(400, 413),
        },
        **secured,
    )
    api.add_api_route(
        "/clubs/{slug}/programs/{program_id}",
        delete_program,
        methods=["DELETE"],
        summary="Delete a program (deleting one that is gone is not an error)",
        status_code=204,
        response_class=Response,
        **secured,
    )
    return api


BATCH_DESCRIPTION = (
    "Each event as the single publish takes it, its Idempotency-Key as `idempotencyKey`, "
    "published in order in one transaction: every event with its deliveries, or, when one "
    "is refused, nothing. A refusal names the event (its `location`, such as "
    "`body.events.3`). The answer gives each event's id in the order sent (201; 200 when "
    "every one repeats an earlier key). A key given twice in one batch is a repeat: the "
    "second gets the first's id, or, with other data, the batch is refused (409)."
)


REPLAY_DESCRIPTION = (
    "Each finished delivery of the window (oldest first, at most "
    "CLUBWIRE_REPLAY_LIMIT) gets one more attempt now, as Retry gives it: the same "
    "delivery and event ids, a fresh signature. A delivery already brought forward and "
    "not yet sent is not counted again, so a repeated request replays nothing twice. "
    "Refused (409) while the endpoint or the club's module is off."
)


ERASURE_DESCRIPTION = (
    "Replaces the member's name and email by the marker [erased] in every event of the "
    "club that carries them (found by email in any case, or by member id), skips their "
    "deliveries not yet delivered, and scrubs them from recorded answers, emails and "
    "messages; ids, kinds and times stay. Answers with a record of the erasure (201) that "
    "holds no personal data. Idempotent: asked again, it finds nothing left. A dry run "
    "(200) counts what would change and changes nothing."
)


def erase_member(
    slug: Slug, body: personal_data.ErasureRequest, request: Request, response: Response
) -> ErasureOut:
    app = context.of(request)
    done = erasures.erase(
        app.sessions, slug, body.wanted, app.now, erasures.By.PLATFORM, dry_run=body.dry_run
    )
    if body.dry_run:
        response.status_code = 200
    return ErasureOut.model_validate(done.describe())


# Every write runs through ``context.transact``: one that loses a race with another request or
# a worker (a deadlock, a serialization failure) is run again before the platform hears of it.


def put_club(slug: Slug, body: ClubIn, request: Request, response: Response) -> ClubOut:
    now = context.now(request)
    settings = context.of(request).settings
    club, created = context.transact(request, _put_club, slug, body, settings, now)
    response.status_code = 201 if created else 200
    return ClubOut.of(club, settings)


def _put_club(
    session: Session, slug: str, body: ClubIn, settings: Settings, now: datetime
) -> tuple[models.Club, bool]:
    """Create or rename the club, and set its payload days when the body gives them."""
    club, created = clubs.put_club(session, slug, body.name, now)
    if "payload_days" in body.model_fields_set:
        days = body.payload_days
        clubs.set_payload_days(session, slug, days, settings.retention_days, now)
    return club, created


def put_module(slug: Slug, body: ModuleIn, request: Request) -> ClubOut:
    now = context.now(request)
    club = context.transact(request, clubs.set_webhooks_module, slug, body.enabled, now)
    return ClubOut.of(club, context.of(request).settings)


def put_program(
    slug: Slug,
    program_id: ProgramIdPath,
    body: program_wire.ProgramData,
    request: Request,
    response: Response,
) -> ProgramOut:
    now = context.now(request)
    program, upserted = context.transact(request, _put_program, slug, program_id, body, now)
    response.status_code = 201 if upserted is programs.Upserted.CREATED else 200
    return ProgramOut.of(program)


async def publish_event(
    slug: Slug,
    body: EventIn,
    request: Request,
    response: Response,
    idempotency_key: Annotated[
        str | None,
        Header(
            max_length=events.MAX_IDEMPOTENCY_KEY,
            # Documented here, checked by events.publish, which says what is wrong in words.
            json_schema_extra={
                "minLength": 1,
                "pattern": event_batches.IDEMPOTENCY_KEY_PATTERN,
            },
            description="Your id for this event (per club), 1–255 printable characters: "
            "a repeat with the same event "
            "and data returns the first event's id (200) and creates nothing; the same key "
            "with other data is refused (409).",
        ),
    ] = None,
) -> EventOut:
    event, created = await run_in_threadpool(_publish, request, slug, body, idempotency_key)
    if not created:
        response.status_code = 200
    return event


async def publish_events(
    slug: Slug, body: event_batches.EventBatch, request: Request, response: Response
) -> Response | EventBatchOut:
    try:
        published = await run_in_threadpool(_publish_batch, request, slug, body)
    except errors.ClubwireError as refused:
        if refused.item is None:
            raise
        return problems.problem_at(refused, f"body.events.{refused.item}")
    if not any(created for _, created in published):
        response.status_code = 200
    events_out = [BatchEventOut(**out.model_dump(), repeated=not new) for out, new in published]
    return EventBatchOut(events=events_out)


def replay(slug: Slug, endpoint_id: EndpointIdPath, body: ReplayIn, request: Request) -> ReplayOut:
    window = replay_window.window(body.since, body.until, body.statuses, body.events)
    limit = context.of(request).settings.replay_limit
    if body.dry_run:
        with context.transaction(request) as session:
            club_id = clubs.get_club(session, slug).id
            done = replays.preview(session, club_id, endpoint_id, window, limit)
    else:
        now = context.now(request)
        done = context.transact(request, _replay, slug, endpoint_id, window, now, limit)
    return ReplayOut.model_validate({**done.describe(), "dryRun": body.dry_run})


def delete_program(slug: Slug, program_id: ProgramIdPath, request: Request) -> Response:
    context.transact(request, _delete_program, slug, program_id)
    return Response(status_code=204)


def _created_or_replaced(route: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """A PUT that answers 201 when it creates and 200 when it replaces, documented so."""
    created = {201: {"description": "Created", "model": model}}
    return {**route, "responses": {**route["responses"], **created}}


def _publish(
    request: Request, slug: str, body: EventIn, idempotency_key: str | None
) -> tuple[EventOut, bool]:
    now = context.now(request)
    keyed = idempotency_key is not None
    return _raced(
        keyed, lambda: context.transact(request, _published, slug, body, now, idempotency_key)
    )


def _publish_batch(
    request: Request, slug: str, batch: event_batches.EventBatch
) -> list[tuple[EventOut, bool]]:
    now = context.now(request)
    keyed = any(item.idempotency_key is not None for item in batch.events)
    return _raced(keyed, lambda: context.transact(request, _published_batch, slug, batch, now))


def _raced(keyed: bool, publish: Callable[[], T]) -> T:
    """Publish once. A concurrent request with one of the same keys that commits first makes
    ours fail on the unique key; asking again then finds the winner's event."""
    try:
        return publish()
    except IntegrityError:
        if not keyed:
            raise
        return publish()


# The writes, each given the transaction's session first (``context.transact``).


def _published(
    session: Session, slug: str, body: EventIn, now: datetime, idempotency_key: str | None
) -> tuple[EventOut, bool]:
    club_id = subscriptions.club_id(session, slug)  # kept: no read once known
    event, created = events.publish_to(
        session, club_id, body.event, body.data, now, idempotency_key
    )
    return _event_out(event), created


def _published_batch(
    session: Session, slug: str, batch: event_batches.EventBatch, now: datetime
) -> list[tuple[EventOut, bool]]:
    club_id = subscriptions.club_id(session, slug)
    published = batches.publish_batch(session, club_id, batch.events, now)
    return [(_event_out(event), created) for event, created in published]


def _event_out(event: models.Event) -> EventOut:
    return EventOut(id=event.id, ordering_key=event.ordering_key, sequence=event.sequence)


def _put_program(
    session: Session, slug: str, program_id: str, body: program_wire.ProgramData, now: datetime
) -> tuple[models.Program, programs.Upserted]:
    club = clubs.get_club(session, slug)
    return programs.put_program(session, club, program_id, body, now)


def _replay(
    session: Session,
    slug: str,
    endpoint_id: str,
    window: replay_window.Window,
    now: datetime,
    limit: int,
) -> replay_window.Replay:
    club_id = clubs.get_club(session, slug).id
    return replays.replay(session, club_id, endpoint_id, window, now, limit)


def _delete_program(session: Session, slug: str, program_id: str) -> None:
    programs.delete_program(session, clubs.get_club(session, slug), program_id)


async def _platform_guard(request: Request) -> None:
    """Asynchronous (it waits for nothing): FastAPI runs a synchronous dependency on its
    thread pool, a hop there and back for every request."""
    expected = context.of(request).settings.platform_token
    if expected is None:
        raise errors.Forbidden(
            "The internal API is off: set CLUBWIRE_PLATFORM_TOKEN to turn it on."
        )
    authorization = request.headers.get("authorization")
    bearer.require(authorization, expected, "platform token", "CLUBWIRE_PLATFORM_TOKEN")
