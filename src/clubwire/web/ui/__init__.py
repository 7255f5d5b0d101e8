"""The settings area and the superadmin page, put into the app: pages, routes, static files,
security headers."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from clubwire.web.ui import (
    admin,
    auth,
    deliveries,
    emails,
    keys,
    replay,
    security,
    urls,
    webhooks,
)

__all__ = ["install"]

STATIC = Path(__file__).with_name("static")


def install(app: FastAPI) -> None:
    """Add the settings area to ``app``; its security headers leave other paths alone."""
    for module in (
        auth,
        admin,
        keys,
        webhooks,
        deliveries,
        emails,
        replay,
    ):
        app.include_router(module.router())
    app.mount(urls.STATIC.rstrip("/"), StaticFiles(directory=STATIC), name="static")
    app.add_middleware(security.SecurityHeaders)
