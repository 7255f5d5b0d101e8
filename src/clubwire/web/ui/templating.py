"""The settings area's pages: one Jinja2 environment (autoescape on everywhere), built once
at start-up and kept in the app's context, and the page rendered from it."""

from __future__ import annotations

from datetime import UTC, datetime

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from clubwire.domain import (
    custom_headers,
    delivering,
    event_catalog,
    max_rates,
    off_reasons,
    personal_data,
    scopes,
    timestamps,
)
from clubwire.web import context


def human_time(moment: datetime) -> str:
    """A time as people read it: ``2026-01-05 12:00:00 UTC``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def environment() -> jinja2.Environment:
    """Templates from ``clubwire/web/ui/templates``; every value is HTML-escaped unless a
    template says otherwise, and none does for stored data."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("clubwire.web.ui", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["iso"] = timestamps.to_wire
    env.filters["human"] = human_time
    env.filters["rate"] = max_rates.in_words
    env.filters["off_reason"] = off_reasons.in_words
    env.filters["skip_reason"] = lambda reason: delivering.SkipReason(reason).in_words
    env.filters["removed"] = lambda removed: personal_data.Removed(removed).in_words
    env.globals.update(
        SCOPES=scopes.ALL,
        EVENTS=event_catalog.SUBSCRIBABLE,
        EVENTS_FOR_STAFF=event_catalog.FOR_STAFF,
        DEAD_LIMIT=delivering.DEAD_IN_A_ROW_LIMIT,
        ASKED=delivering.ASKED,
        RATES=(max_rates.LOWEST, max_rates.HIGHEST),
        HEADER_MASK=custom_headers.MASK,
        MAX_HEADERS=custom_headers.MAX_HEADERS,
        retryable=delivering.retryable,
        refusal=personal_data.refusal,
        MARKER=personal_data.MARKER,
    )
    return env


def render(request: Request, name: str, status: int, **values: object) -> HTMLResponse:
    """The template ``name`` as an HTML response; ``values`` name who is signed in
    (``staff``, None for nobody) among them."""
    template = context.of(request).templates.get_template(name)
    return HTMLResponse(template.render(path=request.url.path, **values), status)
