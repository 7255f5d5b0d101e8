"""Members' personal data in events (DESIGN §9, issue 34): where it sits, how an erasure
finds and replaces it, and how a text that may quote it is scrubbed.

The payload models mark the fields that hold a person's data (``payloads.PERSONAL``: the
``name`` and ``email`` of a member); a *person* is an object of such a model, named by its
``id`` (the member id). At publish, each person an event carries is kept as two digests, of
its member id and of its email (``digests``), never the values; an erasure asks for the
digests of what it was given (``Wanted``), and replaces the personal fields of each matching
person by ``MARKER`` (``erase``). Whatever text may quote them (a receiver's echo, an email)
is scrubbed of every spelling a dump or a log could show (``spellings``, ``scrub``).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import typing
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from urllib.parse import quote, quote_plus

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.fields import FieldInfo

from clubwire import errors
from clubwire.domain import event_catalog, payloads

MARKER = "[erased]"
ID = "id"
EMAIL = "email"

# A path to the persons of a kind's ``data``: keys, and ``EACH`` for every item of a list.
EACH = "*"
Path = tuple[str, ...]


class Removed(StrEnum):
    """Why (part of) an event's body is gone (``events.payload_removed``)."""

    ERASED = "erased"  # a member's personal fields were replaced by the marker
    EXPIRED = "expired"  # the whole payload was emptied after the club's payload days

    @property
    def in_words(self) -> str:
        return _IN_WORDS[self]


_IN_WORDS = {
    Removed.ERASED: "erased at a member's request",
    Removed.EXPIRED: "payload expired",
}


def refusal(removed: str | None) -> str | None:
    """Why a delivery of an event whose payload was removed cannot be sent again; None when
    its body is whole."""
    if removed is None:
        return None
    return f"Its payload was {_REFUSALS[Removed(removed)]}: it cannot be sent again."


_REFUSALS = {
    Removed.ERASED: "erased at a member's request (erased)",
    Removed.EXPIRED: "emptied after the club's payload days (payload expired)",
}


# --------------------------------------------------------------------------- where persons are


@cache
def person_paths(kind: str) -> tuple[tuple[Path, frozenset[str]], ...]:
    """Where the persons of ``kind``'s ``data`` are, each with its personal fields (JSON
    names), read once from the payload models' marks."""
    return tuple(_paths(event_catalog.model_for(kind), ()))


def _paths(model: type[BaseModel], prefix: Path) -> Iterator[tuple[Path, frozenset[str]]]:
    own = frozenset(
        info.alias or name for name, info in model.model_fields.items() if _personal(info)
    )
    if own:
        yield prefix, own
    for name, info in model.model_fields.items():
        for inner, listed in _models_in(info.annotation):
            step = (info.alias or name, EACH) if listed else (info.alias or name,)
            yield from _paths(inner, prefix + step)


def _personal(info: FieldInfo) -> bool:
    extra = info.json_schema_extra
    return isinstance(extra, dict) and bool(extra.get(payloads.PERSONAL))


def _models_in(annotation: object, listed: bool = False) -> Iterator[tuple[type[BaseModel], bool]]:
    """The models an annotation holds (through ``X | None`` and ``list[X]``), each with
    whether it sits in a list."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation, listed
        return
    origin = typing.get_origin(annotation)
    for argument in typing.get_args(annotation):
        yield from _models_in(argument, listed or origin is list)


def persons(kind: str, data: object) -> Iterator[dict[str, object]]:
    """The persons in ``data`` (a kind's payload as JSON values), as their own dicts: what
    ``erase`` changes in place."""
    for path, _ in person_paths(kind):
        yield from _at(data, path)


def _at(value: object, path: Path) -> Iterator[dict[str, object]]:
    if not path:
        if isinstance(value, dict):
            yield value
        return
    step, rest = path[0], path[1:]
    if step == EACH:
        for item in value if isinstance(value, list) else ():
            yield from _at(item, rest)
    elif isinstance(value, dict):
        yield from _at(value.get(step), rest)


# --------------------------------------------------------------------------- digests


def digest(club_id: str, name: str, value: str) -> str:
    """The digest of one identifier (``ID`` or ``EMAIL``) of a person of a club: salted by the
    club, so the same member of two clubs has unrelated digests; an email read case-blind."""
    if name == EMAIL:
        value = value.casefold()
    return hashlib.sha256(f"{club_id}\x00{name}\x00{value}".encode()).hexdigest()


def digests(club_id: str, kind: str, data: object) -> set[str]:
    """The digests of every person ``data`` carries: kept at publish (``event_people``)."""
    found: set[str] = set()
    for person in persons(kind, data):
        found.update(_digests_of(club_id, person))
    return found


def _digests_of(club_id: str, person: Mapping[str, object]) -> Iterator[str]:
    for name in (ID, EMAIL):
        value = person.get(name)
        if isinstance(value, str) and value != MARKER:
            yield digest(club_id, name, value)


@dataclass(frozen=True, slots=True)
class Wanted:
    """Who is to be erased: every person with this email (any case), or with this member
    id; at least one of them."""

    email: str | None = None
    member_id: str | None = None

    def __post_init__(self) -> None:
        if self.email is None and self.member_id is None:
            raise ValueError("an erasure needs an email or a member id")

    @property
    def matched_by(self) -> str:
        """What it matches by, in words without the values: ``email``, ``member_id``, or both."""
        return " ".join(name for name, value in self._given() if value is not None)

    def _given(self) -> tuple[tuple[str, str | None], ...]:
        return (("email", self.email), ("member_id", self.member_id))

    def digests(self, club_id: str) -> list[str]:
        given = ((EMAIL, self.email), (ID, self.member_id))
        return sorted(digest(club_id, name, value) for name, value in given if value is not None)

    def matches(self, person: Mapping[str, object]) -> bool:
        email = person.get(EMAIL)
        by_email = (
            self.email is not None
            and isinstance(email, str)
            and email.casefold() == self.email.casefold()
        )
        return by_email or (self.member_id is not None and person.get(ID) == self.member_id)


class ErasureRequest(BaseModel):
    """What an erasure is asked with (the internal API's body; the CLI's options): an email,
    a member id, or both, and whether to only count."""

    model_config = ConfigDict(
        extra="forbid", alias_generator=to_camel, validate_by_name=True, frozen=True
    )
    email: payloads.Email | None = Field(
        default=None, description="Erase every person with this email, in any case."
    )
    member_id: payloads.PlatformId | None = Field(
        default=None, description="Erase every person with this member id."
    )
    dry_run: StrictBool = Field(
        default=False, description="Count what would change; change nothing."
    )

    @model_validator(mode="after")
    def _names_someone(self) -> ErasureRequest:
        if self.email is None and self.member_id is None:
            raise ValueError("give an email, a member id (memberId), or both")
        return self

    @property
    def wanted(self) -> Wanted:
        return Wanted(self.email, self.member_id)


_NAMED = {"email": "the email:", "memberId": "the member id:"}


def erasure_request(email: str | None, member_id: str | None, dry_run: bool) -> ErasureRequest:
    """The request from plain values (the CLI's options); InvalidInput saying what is wrong."""
    given = {"email": email, "memberId": member_id, "dryRun": dry_run}
    try:
        return ErasureRequest.model_validate(given)
    except ValidationError as error:
        first = error.errors(include_url=False, include_input=False)[0]
        problem = first["msg"].removeprefix("Value error, ")
        where = _NAMED.get(str(first["loc"][0]) if first["loc"] else "", "")
        said = f"{where} {problem}" if where else problem
        raise errors.InvalidInput(f"Cannot erase: {said}.") from None


# --------------------------------------------------------------------------- erasing a body


@dataclass(slots=True)
class Erased:
    """What erasing one event's body did: its new bytes, the values it removed (to scrub from
    texts that may quote them), and the digests of the persons it erased (to forget)."""

    body: bytes
    values: set[str] = field(default_factory=set)
    digests: set[str] = field(default_factory=set)


def erase(club_id: str, kind: str, body: bytes, wanted: Wanted) -> Erased | None:
    """``body`` with the personal fields of every person ``wanted`` matches replaced by
    ``MARKER``; everything else (ids, kinds, times, other fields) as it was. None when no
    person matches (or the body is empty)."""
    if not body:
        return None
    envelope = orjson.loads(body)
    done = Erased(b"")
    fields = dict(person_paths(kind))
    for path, _ in person_paths(kind):
        for person in _at(envelope.get("data"), path):
            if not wanted.matches(person):
                continue
            done.digests.update(_digests_of(club_id, person))
            for name in fields[path]:
                value = person.get(name)
                if isinstance(value, str) and value != MARKER:
                    done.values.add(value)
                    person[name] = MARKER
    if not done.values:
        return None
    done.body = orjson.dumps(envelope)
    return done


# --------------------------------------------------------------------------- scrubbing texts


def spellings(values: Iterable[str]) -> tuple[str, ...]:
    """Every way ``values`` may be written in a text that quotes them: as they are, escaped
    as JSON (as clubwire writes it, and with ASCII escapes), for HTML, and URL-encoded;
    longest first, so a longer spelling is replaced before a part of it."""
    found: set[str] = set()
    for value in values:
        if not value or value == MARKER:
            continue
        found.update(
            {
                value,
                orjson.dumps(value).decode()[1:-1],
                json.dumps(value)[1:-1],
                html.escape(value),
                quote(value, safe=""),
                quote_plus(value),
            }
        )
    return tuple(sorted(found, key=lambda spelling: (-len(spelling), spelling)))


def pattern(spelled: Iterable[str]) -> re.Pattern[str] | None:
    """One case-blind pattern of all ``spelled``; None when there is nothing to find."""
    alternatives = [re.escape(spelling) for spelling in spelled]
    if not alternatives:
        return None
    return re.compile("|".join(alternatives), re.IGNORECASE)


def scrub(text: str | None, found: re.Pattern[str] | None) -> str | None:
    """``text`` with every match of ``found`` replaced by ``MARKER``."""
    if text is None or found is None:
        return text
    return found.sub(MARKER, text)


def holds(text: str | None, found: re.Pattern[str] | None) -> bool:
    return text is not None and found is not None and found.search(text) is not None
