"""``clubwire endpoint …``: webhook endpoints."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

import click
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.cli.base import (
    JSON_OPTION,
    cell,
    cli,
    print_json,
    print_table,
    session_factory,
    settings,
    transaction,
)
from clubwire.domain import custom_headers, delivering, max_rates, off_reasons, timestamps
from clubwire.domain.custom_headers import Header
from clubwire.services import clubs, endpoints
from clubwire.services.delivery import attempts, pings
from clubwire.settings import Settings

T = TypeVar("T")
EVENT_OPTION = click.option(
    "--event", "kinds", multiple=True, help="An event kind to subscribe to; repeat for more."
)


class ReadBy(click.ParamType[T, str]):
    """An option's value read by ``read`` (a service's reader): what it refuses is a usage
    error in its words (which never quote a header's value)."""

    def __init__(self, name: str, read: Callable[[str], T]) -> None:
        self.name = name
        self._read = read

    def convert(self, value: str, param: click.Parameter | None, ctx: click.Context | None) -> T:
        try:
            return self._read(value)
        except errors.InvalidInput as exc:
            self.fail(exc.detail, param, ctx)


MAX_RATE_OPTION = click.option(
    "--max-rate",
    type=ReadBy("max rate", endpoints.read_max_rate),
    default=None,
    metavar="N|none",
    help=f"At most N deliveries per second, {max_rates.LOWEST} to {max_rates.HIGHEST}; none: "
    "no limit (an endpoint starts without one).",
)


HEADER_OPTION = click.option(
    "--header",
    "headers",
    type=ReadBy("header", endpoints.read_header),
    multiple=True,
    metavar='"NAME: VALUE"',
    help="A header sent with every delivery, such as an API gateway's key; repeat for more "
    f"(at most {custom_headers.MAX_HEADERS}). One of the same name is replaced. Its value is "
    "never shown again.",
)

ORDERED_HELP = (
    "Deliver each resource's events (a game's, a member's, an invoice's) one at a time, in "
    "the order they happened; a failing one holds back only the later ones of its resource."
)
ORDERED_OPTION = click.option(
    "--ordered", is_flag=True, help=f"{ORDERED_HELP} An endpoint starts without it."
)
UNORDERED_OPTION = click.option(
    "--unordered", is_flag=True, help="No longer in order: each delivery goes as soon as it is due."
)


@cli.group()
def endpoint() -> None:
    """Webhook endpoints."""


@endpoint.command("create")
@click.argument("slug")
@click.argument("url")
@EVENT_OPTION
@MAX_RATE_OPTION
@HEADER_OPTION
@ORDERED_OPTION
@JSON_OPTION
def endpoint_create(
    slug: str,
    url: str,
    kinds: tuple[str, ...],
    max_rate: max_rates.MaxRate | None,
    headers: tuple[Header, ...],
    ordered: bool,
    as_json: bool,
) -> None:
    """Register an https URL for the events given; prints its id and signing secret (once)."""
    current = settings()
    with transaction(current) as session:
        club = clubs.get_club(session, slug)
        created, secret = endpoints.create_endpoint(
            session,
            club,
            url,
            kinds,
            timestamps.utc_now(),
            current,
            max_rate=max_rate,
            headers=headers,
            ordered=ordered,
        )
        record = endpoints.describe(created, current)
    if as_json:
        print_json({"id": record["id"], "secret": secret, **record})
        return
    click.echo(f"{record['id']}\n{secret}")
    click.echo("The signing secret is shown once: store it now.", err=True)


@endpoint.command("list")
@click.argument("slug")
@JSON_OPTION
def endpoint_list(slug: str, as_json: bool) -> None:
    """List the club's endpoints and their health (and why each one off is off)."""
    current = settings()
    with transaction(current) as session:
        club_id = clubs.get_club(session, slug).id
        found = endpoints.list_endpoints(session, club_id)
        records = [endpoints.describe(e, current) for e in found]
    if as_json:
        print_json(records)
        return
    rows = [
        [
            cell(r["id"]),
            cell(r["url"]),
            ",".join(r["events"]),  # type: ignore[arg-type]
            ",".join(r["headers"]) or "-",  # type: ignore[arg-type]
            "on" if r["enabled"] else "off",
            "none" if r["maxRate"] is None else f"{r['maxRate']}/s",
            "in order" if r["ordered"] else "any",
            f"{r['deadInARow']} of {delivering.DEAD_IN_A_ROW_LIMIT}",
            cell(r["lastResponseCode"]),
            cell(r["lastDeliveryAt"], "never"),
            _why_off(r),
        ]
        for r in records
    ]
    print_table(
        rows,
        [
            "ID",
            "URL",
            "EVENTS",
            "HEADERS",
            "ENABLED",
            "MAX RATE",
            "ORDER",
            "DEAD IN A ROW",
            "LAST CODE",
            "LAST DELIVERY",
            "WHY OFF",
        ],
    )


def _why_off(record: dict[str, object]) -> str:
    """The words of why an endpoint is off (``-`` while it is on)."""
    reason = record["disabledReason"]
    if record["enabled"]:
        return "-"
    return off_reasons.in_words(reason if isinstance(reason, str) else None)


@endpoint.command("update")
@click.argument("endpoint_id", metavar="ID")
@click.option("--url", default=None, help="A new https URL.")
@EVENT_OPTION
@MAX_RATE_OPTION
@HEADER_OPTION
@click.option(
    "--remove-header",
    "removed",
    multiple=True,
    metavar="NAME",
    help="Stop sending the header of this name; repeat for more.",
)
@ORDERED_OPTION
@UNORDERED_OPTION
@JSON_OPTION
def endpoint_update(
    endpoint_id: str,
    url: str | None,
    kinds: tuple[str, ...],
    max_rate: max_rates.MaxRate | None,
    headers: tuple[Header, ...],
    removed: tuple[str, ...],
    ordered: bool,
    unordered: bool,
    as_json: bool,
) -> None:
    """Change an endpoint's URL, its events (--event replaces the whole list), its max rate
    (--max-rate none removes it), its headers (--remove-header first, then --header) and/or
    whether it gets each resource's events in order (for the deliveries not yet attempted)."""
    in_order = _ordered_given(ordered, unordered)
    current = settings()
    with transaction(current) as session:
        club_id = endpoints.club_of_endpoint(session, endpoint_id)
        changed = endpoints.update_endpoint(
            session,
            club_id,
            endpoint_id,
            timestamps.utc_now(),
            current,
            url=url,
            kinds=kinds or None,
            max_rate=max_rate,
            headers=headers,
            removed=removed,
            ordered=in_order,
        )
        record = endpoints.describe(changed, current)
    _report(record, as_json, f"Updated {endpoint_id}.")


def _ordered_given(ordered: bool, unordered: bool) -> bool | None:
    """--ordered: True, --unordered: False, neither: None (unchanged)."""
    if ordered and unordered:
        raise click.UsageError("Give --ordered or --unordered, not both.")
    if not (ordered or unordered):
        return None
    return ordered


@endpoint.command("enable")
@click.argument("endpoint_id", metavar="ID")
@click.option(
    "--resend-skipped", is_flag=True, help="Also send the deliveries skipped while it was off."
)
@JSON_OPTION
def endpoint_enable(endpoint_id: str, resend_skipped: bool, as_json: bool) -> None:
    """Switch an endpoint on (dead in a row starts again at 0)."""
    current = settings()
    with transaction(current) as session:
        club_id = endpoints.club_of_endpoint(session, endpoint_id)
        enabled, resent = endpoints.enable_endpoint(
            session, club_id, endpoint_id, timestamps.utc_now(), resend_skipped
        )
        skipped = endpoints.count_skipped(session, club_id, endpoint_id)
        record = {**endpoints.describe(enabled, current), "resent": resent}
    hint = f" {skipped} skipped deliveries can be sent with --resend-skipped." if skipped else ""
    sent = f" Queued {resent} skipped deliveries." if resent else ""
    _report(record, as_json, f"Enabled {endpoint_id}.{sent}{hint}")


@endpoint.command("disable")
@click.argument("endpoint_id", metavar="ID")
@JSON_OPTION
def endpoint_disable(endpoint_id: str, as_json: bool) -> None:
    """Switch an endpoint off; what it would have received is kept as skipped. The operator
    runs this, so its reason reads "Switched off by a superadmin"."""
    current = settings()
    with transaction(current) as session:
        club_id = endpoints.club_of_endpoint(session, endpoint_id)
        disabled = endpoints.disable_endpoint(
            session, club_id, endpoint_id, timestamps.utc_now(), off_reasons.OffReason.SUPERADMIN
        )
        record = endpoints.describe(disabled, current)
    _report(record, as_json, f"Disabled {endpoint_id}.")


@endpoint.command("delete")
@click.argument("endpoint_id", metavar="ID")
def endpoint_delete(endpoint_id: str) -> None:
    """Delete an endpoint with its deliveries."""
    with transaction(settings()) as session:
        club_id = endpoints.club_of_endpoint(session, endpoint_id)
        endpoints.delete_endpoint(session, club_id, endpoint_id)
    click.echo(f"Deleted {endpoint_id}.")


@endpoint.command("rotate-secret")
@click.argument("endpoint_id", metavar="ID")
@JSON_OPTION
def endpoint_rotate(endpoint_id: str, as_json: bool) -> None:
    """A new signing secret, printed once; the old one stops verifying at once."""
    current = settings()
    with transaction(current) as session:
        club_id = endpoints.club_of_endpoint(session, endpoint_id)
        secret = endpoints.rotate_secret(
            session, club_id, endpoint_id, timestamps.utc_now(), current
        )
    if as_json:
        print_json({"id": endpoint_id, "secret": secret})
        return
    click.echo(secret)
    click.echo("The old secret no longer verifies. The new one is shown once.", err=True)


@endpoint.command("test")
@click.argument("endpoint_id", metavar="ID")
@JSON_OPTION
def endpoint_test(endpoint_id: str, as_json: bool) -> None:
    """Send test: a ping to this endpoint, one attempt; prints the outcome."""
    current = settings()
    with session_factory(current) as sessions:
        with sessions() as session:
            club_id = endpoints.club_of_endpoint(session, endpoint_id)
        result = asyncio.run(_send_test(current, sessions, club_id, endpoint_id))
    if as_json:
        print_json(describe_result(result))
    else:
        click.echo(pings.plain(result))
    if not result.ok:
        raise SystemExit(1)


async def _send_test(
    current: Settings, sessions: sessionmaker[Session], club_id: str, endpoint_id: str
) -> delivering.Result:
    async with attempts.attempter(current) as sends:
        return await pings.send_test(current, sessions, sends, club_id, endpoint_id)


def describe_result(result: delivering.Result) -> dict[str, object]:
    return {
        "deliveryId": result.job.delivery_id,
        "ok": result.ok,
        "responseCode": result.response_code,
        "error": result.error,
        "durationMs": result.duration_ms,
        "startedAt": timestamps.to_wire(result.started_at),
    }


def _report(record: dict[str, object], as_json: bool, message: str) -> None:
    if as_json:
        print_json(record)
    else:
        click.echo(message)
