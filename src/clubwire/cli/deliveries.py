"""``clubwire delivery …``."""

from __future__ import annotations

import click

from clubwire.cli.base import (
    JSON_OPTION,
    cell,
    cli,
    one_line,
    print_json,
    print_table,
    settings,
    transaction,
)
from clubwire.domain import delivering, ordering, personal_data, replay_window, timestamps
from clubwire.domain.delivering import Status
from clubwire.services import clubs
from clubwire.services.delivery import deliveries, replays


@cli.group()
def delivery() -> None:
    """Webhook deliveries."""


@delivery.command("list")
@click.argument("slug")
@click.option("--endpoint", "endpoint_id", default=None, help="Only this endpoint's.")
@click.option("--status", type=click.Choice([s.value for s in Status]), default=None)
@click.option("--limit", type=click.IntRange(1, 1000), default=50, show_default=True)
@JSON_OPTION
def delivery_list(
    slug: str, endpoint_id: str | None, status: str | None, limit: int, as_json: bool
) -> None:
    """The club's recent deliveries, newest first."""
    with transaction(settings()) as session:
        club_id = clubs.get_club(session, slug).id
        found = deliveries.list_deliveries(
            session, club_id, endpoint_id, Status(status) if status else None, limit
        )
        held = deliveries.held(session, found)
        records = [deliveries.describe(d, held.get(d.id)) for d in found]
    if as_json:
        print_json(records)
        return
    rows = [
        [
            cell(r["id"]),
            cell(r["event"]),
            cell(r["eventId"]),
            cell(r["endpointId"]),
            cell(r["status"]),
            cell(r["attempt"]),
            cell(r["responseCode"]),
            cell(r["nextAttemptAt"]),
            cell(_why(r)),
        ]
        for r in records
    ]
    columns = ["ID", "KIND", "EVENT", "ENDPOINT", "STATUS", "ATTEMPT", "CODE", "NEXT ATTEMPT"]
    print_table(rows, [*columns, "WHY"])


def _why(record: dict[str, object]) -> str:
    """In words, why a delivery was skipped or waits, what it was sent after and why its
    payload is gone; empty for none of these."""
    said = (_skipped_because(record), _waiting(record), _missed(record), _payload(record))
    return "; ".join(words for words in said if words is not None)


def _skipped_because(record: dict[str, object]) -> str | None:
    reason = record["skippedReason"]
    return None if reason is None else delivering.SkipReason(str(reason)).in_words


def _waiting(record: dict[str, object]) -> str | None:
    """What a held delivery waits for: the first of its line."""
    sequence = record["waitsFor"]
    if not isinstance(sequence, int):
        return None
    return ordering.waiting_in_words(sequence, str(record["orderingKey"]))


def _missed(record: dict[str, object]) -> str | None:
    sequence = record["missedSequence"]
    return ordering.missed_in_words(sequence) if isinstance(sequence, int) else None


def _payload(record: dict[str, object]) -> str | None:
    removed = record["payloadRemoved"]
    return None if removed is None else personal_data.Removed(str(removed)).in_words


@delivery.command("show")
@click.argument("delivery_id", metavar="ID")
@JSON_OPTION
def delivery_show(delivery_id: str, as_json: bool) -> None:
    """One delivery and every attempt made of it: when, how long, the answer or the error."""
    with transaction(settings()) as session:
        club_id = deliveries.club_of_delivery(session, delivery_id)
        found = deliveries.get_delivery(session, club_id, delivery_id)
        record = deliveries.describe(found, deliveries.held(session, [found]).get(found.id))
        attempts = [
            deliveries.describe_attempt(attempt)
            for attempt in deliveries.attempts_of(session, found)
        ]
    if as_json:
        print_json({**record, "attempts": attempts})
        return
    for label, key in SHOWN:
        click.echo(f"{label:<13}{cell(record[key])}")
    click.echo(f"{'Resource':<13}{_place(record)}")
    click.echo(f"{'Next attempt':<13}{_waiting(record) or _next_attempt(record)}")
    click.echo(f"{'Missed':<13}{cell(_missed(record))}")
    click.echo(f"{'Skipped':<13}{cell(_skipped_because(record))}")
    click.echo(f"{'Payload':<13}{_payload(record) or 'as published'}")
    click.echo()
    print_table([_attempt_row(attempt) for attempt in attempts], ATTEMPT_COLUMNS)


SHOWN = [
    ("Delivery", "id"),
    ("Event", "eventId"),
    ("Kind", "event"),
    ("Endpoint", "endpointId"),
    ("Status", "status"),
    ("Attempts", "attempt"),
]
ATTEMPT_COLUMNS = ["#", "TRIGGER", "STARTED", "MS", "CODE", "ERROR", "RETRY-AFTER", "ANSWER"]
ANSWER_WIDTH = 60


def _place(record: dict[str, object]) -> str:
    """Its event's ordering key and sequence, and whether it goes in order."""
    if record["orderingKey"] is None:
        return "-"
    order = ", in order" if record["inOrder"] else ""
    return f"{record['orderingKey']} sequence {record['sequence']}{order}"


def _next_attempt(record: dict[str, object]) -> str:
    """When the next attempt is due, and why when the receiver asked for that time."""
    due = cell(record["nextAttemptAt"])
    return f"{delivering.ASKED} {due}" if record["nextAttemptAsked"] else due


def _attempt_row(attempt: dict[str, object]) -> list[str]:
    return [
        cell(attempt["number"]),
        cell(attempt["trigger"]),
        cell(attempt["startedAt"]),
        cell(attempt["durationMs"]),
        cell(attempt["responseCode"]),
        cell(attempt["error"]),
        cell(one_line(str(attempt["retryAfter"] or ""), ANSWER_WIDTH)),
        cell(one_line(str(attempt["excerpt"] or ""), ANSWER_WIDTH)),
    ]


@delivery.command("retry")
@click.argument("delivery_id", metavar="ID")
@JSON_OPTION
def delivery_retry(delivery_id: str, as_json: bool) -> None:
    """Retry now: bring a waiting attempt forward, or make one more attempt of a finished one."""
    with transaction(settings()) as session:
        club_id = deliveries.club_of_delivery(session, delivery_id)
        retried = deliveries.retry(session, club_id, delivery_id, timestamps.utc_now())
        record = deliveries.describe(retried)
    if as_json:
        print_json(record)
    else:
        click.echo(f"Retrying {delivery_id} now.")


@delivery.command("replay")
@click.argument("slug")
@click.option("--endpoint", "endpoint_id", required=True, help="The endpoint's id.")
@click.option(
    "--since",
    required=True,
    help="From this minute (included): 2026-01-05T12:00Z, UTC unless an offset is given "
    "(2026-01-05T13:00+01:00 is the same minute).",
)
@click.option("--until", required=True, help="To this minute (not included), as --since.")
@click.option(
    "--status",
    "statuses",
    multiple=True,
    metavar="STATUS",
    help="dead, skipped or succeeded; repeat for more (default: dead and skipped).",
)
@click.option(
    "--event", "kinds", multiple=True, metavar="KIND", help="Only this kind; repeat for more."
)
@click.option("--dry-run", is_flag=True, help="Count what would be replayed; send nothing.")
@JSON_OPTION
def delivery_replay(
    slug: str,
    endpoint_id: str,
    since: str,
    until: str,
    statuses: tuple[str, ...],
    kinds: tuple[str, ...],
    dry_run: bool,
    as_json: bool,
) -> None:
    """Send an endpoint's finished deliveries of a time range again, oldest first, each as
    Retry does (at most CLUBWIRE_REPLAY_LIMIT in one go)."""
    window = replay_window.window(since, until, statuses, kinds)
    current = settings()
    with transaction(current) as session:
        club_id = clubs.get_club(session, slug).id
        if dry_run:
            done = replays.preview(session, club_id, endpoint_id, window, current.replay_limit)
        else:
            now = timestamps.utc_now()
            done = replays.replay(session, club_id, endpoint_id, window, now, current.replay_limit)
    if as_json:
        print_json({**done.describe(), "dryRun": dry_run})
    else:
        click.echo(done.summary(preview=dry_run))
