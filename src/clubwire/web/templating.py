"""The settings area's pages: one Jinja2 environment (autoescape on everywhere) and a renderer."""

from __future__ import annotations

from datetime import UTC, datetime

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from clubwire.domain import delivering, event_catalog, max_rates, scopes, timestamps


def human_time(moment: datetime) -> str:
    """A time as people read it: ``2026-01-05 12:00:00 UTC``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def environment() -> jinja2.Environment:
    """Templates from ``clubwire/web/templates``; every value is HTML-escaped unless a template
    says otherwise, and none does for stored data."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("clubwire.web", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["iso"] = timestamps.to_wire
    env.filters["human"] = human_time
    env.filters["rate"] = max_rates.in_words
    env.globals.update(
        SCOPES=scopes.ALL,
        EVENTS=event_catalog.SUBSCRIBABLE,
        EVENTS_FOR_STAFF=event_catalog.FOR_STAFF,
        DEAD_LIMIT=delivering.DEAD_IN_A_ROW_LIMIT,
        RATES=(max_rates.LOWEST, max_rates.HIGHEST),
        retryable=delivering.retryable,
    )
    return env


class Pages:
    """Renders a template into an HTML response; every page is told who is signed in."""

    def __init__(self, env: jinja2.Environment) -> None:
        self._env = env

    def render(
        self,
        request: Request,
        name: str,
        status: int = 200,
        **context: object,
    ) -> HTMLResponse:
        """``context`` names who is signed in (``staff``, None for nobody) among its values."""
        body = self._env.get_template(name).render(path=request.url.path, **context)
        return HTMLResponse(body, status)
