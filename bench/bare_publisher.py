"""The bare publisher: the floor ``bench/publish.py`` measures clubwire's publishing against.

``rows`` makes what any design must write for an event: the event (its envelope made from the
data as sent, its id made as clubwire makes it) and one pending delivery, due now, per
endpoint. ``publish.bare`` writes them in the benchmark's process; run as a script, this
module serves them over HTTP as ``clubwire serve`` serves the internal API (uvicorn, uvloop,
httptools, no access log; the writes in Starlette's thread pool, on the engine clubwire makes
for the database), with the internal API's two publishing routes' bodies:
``POST /events`` (one event) and ``POST /events/batch`` (``{"events": [...]}``), each request
one transaction with two Core inserts, answered with the events' ids as JSON. It checks no
token, validates nothing, reads no club, module switch or subscribers and marks no queue
heads: that is clubwire's own work, which the ratio ours/bare prices.

Run: ``python bench/bare_publisher.py <port> <club id> <endpoint id>,<endpoint id>,…`` with
clubwire's ``CLUBWIRE_*`` settings in the environment (its database among them).
"""

from __future__ import annotations

import sys
from datetime import datetime
from typing import Any

import orjson
import uvicorn
from sqlalchemy import Engine, insert
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from clubwire import ids
from clubwire.domain import event_catalog, timestamps
from clubwire.domain.delivering import Status, Trigger
from clubwire.settings import load_settings
from clubwire.storage import database, tables

Row = dict[str, Any]
ADD_EVENT, ADD_DELIVERIES = insert(tables.events), insert(tables.deliveries)


def rows(
    club_id: str, endpoint_ids: list[str], kind: str, data: dict[str, Any], now: datetime
) -> tuple[Row, list[Row]]:
    """An event of ``kind`` and its deliveries, as plain rows."""
    event_id = ids.new_id("evt")
    body = event_catalog.envelope(event_id, kind, now, club_id, data)
    event = {"id": event_id, "club_id": club_id, "kind": kind, "body": body, "created_at": now}
    deliveries = [
        {
            "id": ids.new_sorted_id("dlv", now),
            "club_id": club_id,
            "event_id": event_id,
            "endpoint_id": endpoint_id,
            "status": Status.PENDING.value,
            "attempt": 0,
            "next_attempt_at": now,
            "next_trigger": Trigger.SCHEDULED.value,
            "created_at": now,
            "updated_at": now,
        }
        for endpoint_id in endpoint_ids
    ]
    return event, deliveries


def app(engine: Engine, club_id: str, endpoint_ids: list[str]) -> Starlette:
    def write(sent: list[dict[str, Any]]) -> list[str]:
        now = timestamps.utc_now()
        made = [rows(club_id, endpoint_ids, e["event"], e["data"], now) for e in sent]
        with engine.begin() as connection:
            connection.execute(ADD_EVENT, [event for event, _ in made])
            connection.execute(ADD_DELIVERIES, [d for _, deliveries in made for d in deliveries])
        return [event["id"] for event, _ in made]

    async def one(request: Request) -> Response:
        (event_id,) = await run_in_threadpool(write, [orjson.loads(await request.body())])
        return Response(orjson.dumps({"id": event_id}), 201, media_type="application/json")

    async def batch(request: Request) -> Response:
        sent = orjson.loads(await request.body())["events"]
        made = await run_in_threadpool(write, sent)
        answer = {"events": [{"id": event_id} for event_id in made]}
        return Response(orjson.dumps(answer), 201, media_type="application/json")

    routes = [
        Route("/events", one, methods=["POST"]),
        Route("/events/batch", batch, methods=["POST"]),
    ]
    return Starlette(routes=routes)


def main(port: int, club_id: str, endpoint_ids: list[str]) -> None:
    engine = database.engine_for(load_settings())
    uvicorn.run(
        app(engine, club_id, endpoint_ids),
        host="127.0.0.1",
        port=port,
        loop="uvloop",
        http="httptools",
        access_log=False,
        log_level="warning",
        server_header=False,
    )


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], sys.argv[3].split(","))
