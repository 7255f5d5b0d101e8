"""One world for the docs' examples: a real ``clubwire serve`` on SQLite, seeded with the clubs,
programs and keys the docs show, and one real signed delivery received over HTTPS. The server
is traced into a real OTLP/HTTP collector (``tests.collector``), so the delivery carries a
``traceparent`` as a traced operator's would.

The examples read their inputs from ``example_env``: ``CLUB_BASE_URL``, ``CLUBWIRE_API_KEY``,
``WEBHOOK_SECRET`` (and ``CLUBWIRE_DATABASE_URL`` etc., so ``clubwire`` commands see the same
database). The tools they need (``node``, ``curl``) are skipped when missing, unless
``CLUBWIRE_REQUIRE_NODE=1`` (as in CI) makes that a failure.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pytest

from clubwire.domain import event_catalog
from clubwire.services import clubs, endpoints
from clubwire.services.club_api import keys
from clubwire.services.delivery import events as event_service
from clubwire.storage import database, migrate
from tests.browser import live_server
from tests.collector import Collector, collecting
from tests.conftest import SECRET_KEY, make_settings
from tests.factories import EPOCH, make_club, make_key, make_program
from tests.receiver import Received, authority, serving

REQUIRE_TOOLS = os.environ.get("CLUBWIRE_REQUIRE_NODE") == "1"
SLUG = "granite"
WEBHOOK_PATH = "/webhooks/clubwire"

# The programs docs/api.md shows; the private and draft ones must not appear.
CREATED = {"createdAt": "2025-11-02T15:04:05.000Z", "updatedAt": "2025-12-01T09:00:00.000Z"}
PROGRAMS: dict[str, dict[str, object]] = {
    "tue-night-league": {
        "name": "Tuesday Night League",
        "description": "Social league, two draws a night, teams of four.",
        "startDate": "2026-01-13T18:30:00.000Z",
        "endDate": "2026-05-12T21:30:00.000Z",
        **CREATED,
    },
    "learn-to-curl-jan": {
        "name": "Learn to Curl (January)",
        "description": "Six Saturday mornings on the ice. Brooms and sliders provided.",
        "type": "LEARN_TO_CURL",
        "startDate": "2026-01-10T15:00:00.000Z",
        "endDate": "2026-02-14T17:00:00.000Z",
        "price": "120.00",
        "capacity": 24,
        **CREATED,
    },
    "board-retreat": {"name": "Board retreat", "private": True},
    "spring-draft": {"name": "Spring League (draft)", "status": "DRAFT"},
}


@dataclass(frozen=True)
class World:
    url: str
    base_url: str
    key: str
    revoked_key: str
    games_only_key: str
    other_club_key: str
    module_off_key: str
    secret: str
    delivery: Received
    folder: Path
    collector: Collector  # what the server traced

    def env(self, settings_env: dict[str, str]) -> dict[str, str]:
        return {
            **settings_env,
            "CLUB_BASE_URL": self.base_url,
            "CLUBWIRE_API_KEY": self.key,
            "WEBHOOK_SECRET": self.secret,
        }


def require(tool: str) -> str:
    """The path of ``tool``; skips the test without it (fails with CLUBWIRE_REQUIRE_NODE=1)."""
    path = shutil.which(tool)
    if path is None:
        reason = f"{tool} is not installed (apt-get install {'nodejs' if tool == 'node' else tool})"
        if REQUIRE_TOOLS:
            pytest.fail(f"{reason} (CLUBWIRE_REQUIRE_NODE=1)")
        pytest.skip(reason)
    return path


def base_env() -> dict[str, str]:
    """This process's environment without its ``CLUBWIRE_*``, with the venv first on PATH."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CLUBWIRE_")}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["PYTHONUNBUFFERED"] = "1"
    return env


@pytest.fixture(scope="package")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    folder = tmp_path_factory.mktemp("docs-world")
    settings = make_settings(
        f"sqlite:///{folder / 'clubwire.db'}", folder, allow_private_targets=True
    )
    engine = database.engine_for(settings)
    migrate.upgrade(engine)
    sessions = database.sessions(engine)
    tls = authority(folder)
    with serving(tls, WEBHOOK_PATH) as receiver, collecting() as collector:
        with sessions.begin() as session:
            granite = make_club(session, SLUG, name="Granite Curling Club")
            for program_id, overrides in PROGRAMS.items():
                make_program(session, granite, program_id, **overrides)
            _, key = make_key(session, granite, name="Club website")
            revoked, revoked_key = make_key(session, granite, name="Old website")
            keys.revoke_key(session, granite.id, revoked.prefix, EPOCH)
            _, games_only = make_key(session, granite, ("read:games",), name="Scoreboard")
            _, other = make_key(session, make_club(session, "marble"))
            _, off = make_key(session, make_club(session, "slate"))
            clubs.set_webhooks_module(session, "slate", False, EPOCH)
            _, secret = endpoints.create_endpoint(
                session, granite, receiver.url, event_catalog.SUBSCRIBABLE, EPOCH, settings
            )
        traced = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
        with live_server.serve(settings, folder, tls.bundle, traced) as server:
            with sessions.begin() as session:
                now = datetime.now(UTC)
                data = event_catalog.sample("registration.created", now)
                event_service.publish(
                    session, clubs.get_club(session, SLUG), "registration.created", data, now
                )
            (delivery,) = receiver.wait_for(1)
            yield World(
                url=server.url,
                base_url=f"{server.url}/clubs/{SLUG}",
                key=key,
                revoked_key=revoked_key,
                games_only_key=games_only,
                other_club_key=other,
                module_off_key=off,
                secret=secret,
                delivery=delivery,
                folder=folder,
                collector=collector,
            )
    engine.dispose()


@pytest.fixture(scope="package")
def example_env(world: World) -> dict[str, str]:
    """The environment every example runs in."""
    folder = world.folder
    return world.env(
        {
            **base_env(),
            "CLUBWIRE_HOME": str(folder),
            "CLUBWIRE_DATABASE_URL": f"sqlite:///{folder / 'clubwire.db'}",
            "CLUBWIRE_SECRET_KEY": SECRET_KEY,
        }
    )
