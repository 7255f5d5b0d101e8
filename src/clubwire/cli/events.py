"""``clubwire event …`` and ``clubwire trigger``: publish events, print samples."""

from __future__ import annotations

import click

from clubwire import errors
from clubwire.cli.base import (
    INPUT_FILE,
    JSON_OPTION,
    cli,
    print_json,
    read_input,
    record_of,
    settings,
    transaction,
)
from clubwire.cli.clubs import read_json
from clubwire.domain import event_batches, event_catalog, timestamps
from clubwire.services import clubs
from clubwire.services.delivery import batches, events


@cli.group()
def event() -> None:
    """Club events (the webhooks' payloads)."""


@event.command("publish")
@click.argument("slug")
@click.argument("kind", type=click.Choice(event_catalog.SUBSCRIBABLE))
@click.option(
    "--data",
    "data_file",
    type=INPUT_FILE,
    required=True,
    help="A JSON file with the event's data ('-' reads stdin).",
)
@click.option(
    "--idempotency-key",
    default=None,
    help="Publishing the same event again with it creates nothing; other data with it is refused.",
)
@JSON_OPTION
def event_publish(
    slug: str, kind: str, data_file: str, idempotency_key: str | None, as_json: bool
) -> None:
    """Publish an event; prints its id."""
    _publish(slug, kind, read_json(*read_input(data_file)), as_json, idempotency_key)


@event.command("publish-batch")
@click.argument("slug")
@click.argument("file", type=INPUT_FILE)
@JSON_OPTION
def event_publish_batch(slug: str, file: str, as_json: bool) -> None:
    """Publish the events of FILE (a JSON array; '-' reads stdin) together, all or none;
    prints their ids in order.

    Each event is an object as the internal API's batch takes it: "event", "data" and, if
    you like, "idempotencyKey". A file refused says which event (1 first) and why.
    """
    current = settings()
    raw, name = read_input(file, current.max_request_bytes)
    batch = _read_batch(raw, name)
    try:
        with transaction(current) as session:
            club = clubs.get_club(session, slug)
            published = batches.publish_batch(session, club.id, batch, timestamps.utc_now())
            answer = [{"id": found.id, "repeated": not new} for found, new in published]
    except errors.ClubwireError as refused:
        if refused.item is None:
            raise
        raise errors.InvalidInput(f"{name}: event {refused.item + 1}: {refused.detail}") from None
    if as_json:
        print_json({"events": answer})
    else:
        click.echo("\n".join(str(published["id"]) for published in answer))


def _read_batch(raw: bytes, name: str) -> list[event_batches.BatchEvent]:
    items = read_json(raw, name)
    if not isinstance(items, list):
        raise errors.InvalidInput(f"{name} must hold a JSON array of events.")
    if not 0 < len(items) <= event_batches.MAX_EVENTS:
        raise errors.InvalidInput(
            f"{name} holds {len(items)} events; a batch has 1–{event_batches.MAX_EVENTS}."
        )
    return [
        record_of(event_batches.BatchEvent, item, f"{name}: event {index + 1}")
        for index, item in enumerate(items)
    ]


@event.command("sample")
@click.argument("kind", type=click.Choice(event_catalog.KINDS))
def event_sample(kind: str) -> None:
    """Print a valid, realistic data object for KIND."""
    print_json(event_catalog.sample(kind, timestamps.utc_now()))


@cli.command(epilog=f"KIND is one of: {', '.join(event_catalog.SUBSCRIBABLE)}.")
@click.argument("slug")
@click.argument("kind", metavar="KIND", type=click.Choice(event_catalog.SUBSCRIBABLE))
@JSON_OPTION
def trigger(slug: str, kind: str, as_json: bool) -> None:
    """Publish a realistic sample event of KIND for the club; prints its id."""
    _publish(slug, kind, event_catalog.sample(kind, timestamps.utc_now()), as_json)


def _publish(
    slug: str, kind: str, data: object, as_json: bool, idempotency_key: str | None = None
) -> None:
    with transaction(settings()) as session:
        published, _ = events.publish(
            session,
            clubs.get_club(session, slug),
            kind,
            data,
            timestamps.utc_now(),
            idempotency_key,
        )
        event_id = published.id
    if as_json:
        print_json({"id": event_id})
    else:
        click.echo(event_id)
