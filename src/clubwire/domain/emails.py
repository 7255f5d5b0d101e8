"""The emails club admins get when an endpoint fails, as plain text, and the RFC 5322
message they go out in. Pure: the outbox stores what ``failing`` and ``switched_off`` write,
and the worker wraps it with ``compose`` when it sends.

What an email says comes partly from outside (the endpoint's URL, which a club typed; the
receiver's answer): every such text is made one line without controls before it reaches a
header or the body, so nothing can add a header, and a URL is shown without its user, password
or query, which may hold a secret."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from datetime import datetime
from email import utils
from email.message import EmailMessage
from urllib.parse import urlsplit, urlunsplit

from clubwire.domain import off_reasons

SUBJECT_LIMIT = 200
WARN_AT = 3  # dead deliveries in a row that bring the first email


@dataclass(frozen=True, slots=True)
class FailingEndpoint:
    """What an email tells of the endpoint: ``link`` opens it in the settings area."""

    club_name: str
    url: str
    link: str
    response_code: int | None
    error: str | None


@dataclass(frozen=True, slots=True)
class Draft:
    subject: str
    body: str


def one_line(value: str, limit: int = 500) -> str:
    """``value`` with every control, line break and invisible format character made a
    space, spaces run together, cut to ``limit`` characters."""
    spaced = "".join(" " if unicodedata.category(c)[0] in "CZ" else c for c in value)
    joined = " ".join(spaced.split())
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def shown_url(url: str) -> str:
    """The URL without its user, password, query or fragment: what an email may show."""
    parts = urlsplit(one_line(url, 2048))
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    query = "…" if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def last_answer(response_code: int | None, error: str | None) -> str:
    """What the receiver answered last, in a line: ``HTTP 503``, or what went wrong."""
    said = [f"HTTP {response_code}"] if response_code is not None else []
    if error:
        said.append(one_line(error, 200))
    return " – ".join(said) or "no answer"


def failing(endpoint: FailingEndpoint, dead: int, limit: int) -> Draft:
    """The warning: ``dead`` deliveries in a row have died; ``limit`` switches it off."""
    url = shown_url(endpoint.url)
    left = limit - dead
    return Draft(
        _subject(f"Webhook deliveries are failing: {url}"),
        _body(
            endpoint,
            f"The last {dead} deliveries to one of your webhook endpoints failed every "
            "attempt, so their events did not reach your receiver.",
            f"What happens next: clubwire keeps sending new events to it. If {left} more "
            f"deliver{'y fails' if left == 1 else 'ies fail'} in a row, the endpoint is "
            "switched off; one delivery that gets through resets the count. Please check "
            "that the receiver is up and answers with a 2xx status.",
        ),
    )


def switched_off(endpoint: FailingEndpoint, reason: off_reasons.OffReason, limit: int) -> Draft:
    """The endpoint was switched off, for ``reason``: its receiver answered 410 Gone, or
    ``limit`` deliveries in a row died."""
    url = shown_url(endpoint.url)
    if reason is off_reasons.OffReason.GONE:
        why = (
            "its receiver answered 410 Gone, which means it wants no more webhooks. "
            "A single such answer switches an endpoint off."
        )
        again = "If the receiver should get webhooks again"
    else:
        why = f"{limit} deliveries in a row failed every attempt."
        again = "When the receiver works again"
    return Draft(
        _subject(f"Webhook endpoint switched off: {url}"),
        _body(
            endpoint,
            f"One of your webhook endpoints was switched off, because {why}",
            "What happens next: nothing more is sent to it. Deliveries that were waiting "
            f"are kept as skipped. {again}, switch the endpoint back on in the settings "
            "area: you can choose to resend the skipped deliveries then.",
        ),
    )


def _subject(text: str) -> str:
    return one_line(text, SUBJECT_LIMIT)


def _body(endpoint: FailingEndpoint, what: str, next_steps: str) -> str:
    club = one_line(endpoint.club_name, 200)
    return "\n".join(
        [
            "Hello,",
            "",
            f"{what}",
            "",
            f"Club: {club}",
            f"Endpoint: {shown_url(endpoint.url)}",
            f"Last answer from the receiver: {last_answer(endpoint.response_code, endpoint.error)}",
            "",
            next_steps,
            "",
            f"See the endpoint and its recent deliveries: {one_line(endpoint.link, 2048)}",
            "",
            f"You get this email because you are an admin of {club} in Webhooks & API. "
            "You can turn these emails off for yourself on the Webhooks page.",
            "",
            "– clubwire",
            "",
        ]
    )


def compose(
    sender: str, recipient: str, draft: Draft, message_id: str, written_at: datetime
) -> EmailMessage:
    """The RFC 5322 message for ``draft``. ``message_id`` (``<id@domain>``) and the date stay
    the same when the same email is sent again, so a mail system may see a repeat as one."""
    message = EmailMessage()
    message["From"] = sender
    message["To"] = one_line(recipient, 254)
    message["Subject"] = one_line(draft.subject, SUBJECT_LIMIT)
    message["Date"] = utils.format_datetime(written_at)
    message["Message-ID"] = message_id
    message["Auto-Submitted"] = "auto-generated"  # RFC 3834: no out-of-office replies
    message.set_content(draft.body)
    return message


def message_id(email_id: str, sender: str) -> str:
    """``<email_id@domain of the sender>``: the same for every sending of one email."""
    _, address = utils.parseaddr(sender)
    domain = address.rpartition("@")[2] or "clubwire.invalid"
    return f"<{email_id}@{one_line(domain, 200)}>"
