"""The settings area and the superadmin page, put into the app: pages, routes, static files,
security headers."""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from starlette.staticfiles import StaticFiles

from clubwire.web import (
    security,
    ui_admin,
    ui_auth,
    ui_deliveries,
    ui_emails,
    ui_replay,
    ui_settings,
    ui_webhooks,
)

STATIC = Path(__file__).with_name("static")


def install(app: FastAPI) -> None:
    """Add the settings area to ``app``; its security headers leave other paths alone."""
    for module in (
        ui_auth,
        ui_admin,
        ui_settings,
        ui_webhooks,
        ui_deliveries,
        ui_emails,
        ui_replay,
    ):
        app.include_router(module.router())
    app.mount(security.STATIC_PREFIX.rstrip("/"), StaticFiles(directory=STATIC), name="static")
    app.add_middleware(security.SecurityHeaders)
