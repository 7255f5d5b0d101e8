"""An endpoint's headers of its own (services/endpoints.py) on SQLite and PostgreSQL: sealed at
rest as one document, set, replaced and removed by name, ten at most, and whatever is refused
(reserved names, hostile names and values) leaves nothing stored."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import custom_headers
from clubwire.domain.custom_headers import Header
from clubwire.domain.sealing import Sealer
from clubwire.services import endpoints
from clubwire.settings import Settings
from clubwire.storage.models import Endpoint
from tests.factories import EPOCH, make_club, receiver_settings

URL = "https://127.0.0.1/hooks"
KINDS = ["registration.created"]
VALUE = "k3y-6f1d9a0c-never-in-clear"
OWN = (Header("X-Api-Key", VALUE), Header("Authorization", "Bearer tok.en"))


def _create(
    sessions: sessionmaker[Session], settings: Settings, headers: tuple[Header, ...]
) -> tuple[str, str]:
    """A new endpoint with ``headers``; its club's id and its own."""
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = endpoints.create_endpoint(
            session, club, URL, KINDS, EPOCH, receiver_settings(settings), headers=headers
        )
        return club.id, endpoint.id


def _saved(sessions: sessionmaker[Session], settings: Settings) -> tuple[Header, ...]:
    """The one endpoint's headers, opened from the stored row."""
    with sessions() as session:
        sealed = session.scalars(select(Endpoint.headers_sealed)).one()
    if sealed is None:
        return ()
    return custom_headers.loads(Sealer(settings.secret_key_value()).open(sealed))


def _update(
    sessions: sessionmaker[Session],
    settings: Settings,
    ids: tuple[str, str],
    headers: tuple[Header, ...] = (),
    removed: tuple[str, ...] = (),
) -> list[str]:
    """Change the endpoint's headers; the names it then lists."""
    with sessions.begin() as session:
        changed = endpoints.update_endpoint(
            session, *ids, EPOCH, settings, headers=headers, removed=removed
        )
        return endpoints.header_names(changed, settings)


def _count(sessions: sessionmaker[Session]) -> int:
    with sessions() as session:
        return session.scalar(select(func.count()).select_from(Endpoint)) or 0


def test_headers_are_sealed_as_one_document_and_never_stored_in_clear(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _create(sessions, settings, OWN)
    with sessions() as session:
        row = session.execute(text("SELECT * FROM endpoints")).one()
        endpoint = session.scalars(select(Endpoint)).one()
        described = endpoints.describe(endpoint, settings)
    assert all(VALUE not in str(column) and "tok.en" not in str(column) for column in row)
    assert _saved(sessions, settings) == OWN
    assert described["headers"] == ["X-Api-Key", "Authorization"]
    assert VALUE not in str(described)


def test_an_endpoint_without_headers_stores_none(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    ids = _create(sessions, settings, ())
    with sessions() as session:
        assert session.scalar(text("SELECT headers_sealed FROM endpoints")) is None
    _update(sessions, settings, ids, (Header("X-A", "1"),))
    assert _update(sessions, settings, ids, removed=("x-a",)) == []
    with sessions() as session:
        assert session.scalar(text("SELECT headers_sealed FROM endpoints")) is None


def test_a_change_removes_then_sets_and_replaces_by_name_in_any_case(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    ids = _create(sessions, settings, OWN)
    names = _update(sessions, settings, ids, (Header("x-api-key", "new"), Header("X-Team", "t")))
    assert names == ["x-api-key", "Authorization", "X-Team"]
    assert _update(sessions, settings, ids, removed=("AUTHORIZATION",)) == ["x-api-key", "X-Team"]
    assert _saved(sessions, settings) == (Header("x-api-key", "new"), Header("X-Team", "t"))
    with sessions.begin() as session:  # a change of anything else keeps them
        endpoints.update_endpoint(session, *ids, EPOCH, settings, kinds=["game.updated"])
    assert _saved(sessions, settings) == (Header("x-api-key", "new"), Header("X-Team", "t"))


def test_ten_at_most_counting_what_the_change_leaves(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    ten = tuple(Header(f"X-Own-{i}", "v") for i in range(10))
    ids = _create(sessions, settings, ten)
    with pytest.raises(errors.BadHeaders, match=r"at most 10 headers .* this would make 11"):
        _update(sessions, settings, ids, (Header("X-Own-10", "v"),))
    assert _saved(sessions, settings) == ten
    names = _update(sessions, settings, ids, (Header("X-Own-10", "v"),), removed=("X-Own-0",))
    assert names == [f"X-Own-{i}" for i in range(1, 11)]
    with pytest.raises(errors.BadHeaders, match="at most 10"):
        _create(sessions, settings, (*ten, Header("X-Eleventh", "v")))
    assert _count(sessions) == 1


def test_removing_a_header_that_is_not_there_changes_nothing(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    ids = _create(sessions, settings, OWN)
    with pytest.raises(errors.BadHeaders, match=r"^X-Gone is not one of this endpoint's"):
        _update(sessions, settings, ids, (Header("X-New", "n"),), removed=("X-Gone",))
    assert _saved(sessions, settings) == OWN


RESERVED = [
    "Host", "HOST", "content-type", "Content-Length", "Transfer-Encoding", "connection",
    "User-Agent", "accept-encoding", "X-Service-Signature", "x-service-delivery", "webhook-id",
    "WEBHOOK-SIGNATURE", "Keep-Alive", "Proxy-Authenticate", "proxy-authorization", "te",
    "Trailer", "Upgrade", "Proxy-Connection", "Expect",
]  # fmt: skip


@pytest.mark.parametrize("name", RESERVED)
def test_reserved_names_are_refused_and_nothing_is_stored(
    sessions: sessionmaker[Session], settings: Settings, name: str
) -> None:
    with pytest.raises(errors.BadHeaders, match=f"^{name} cannot be one of") as caught:
        _create(sessions, settings, (Header(name, VALUE),))
    assert caught.value.part == "name"
    assert _count(sessions) == 0
    ids = _create(sessions, settings, OWN)
    with pytest.raises(errors.BadHeaders, match=f"^{name} cannot be one of"):
        _update(sessions, settings, ids, (Header("X-Fine", "v"), Header(name, VALUE)))
    assert _saved(sessions, settings) == OWN


HOSTILE = {
    "CR LF in a value": Header("X-Api-Key", f"{VALUE}\r\nX-Evil: 1"),
    "LF in a name": Header("X-Api\nHost", VALUE),
    "NUL in a value": Header("X-Api-Key", f"{VALUE}\x00"),
    "non-ASCII value": Header("X-Api-Key", f"{VALUE}é"),
    "look-alike name": Header("X\u2010Api\u2010Key", VALUE),
    "10,000 characters": Header("X-Api-Key", VALUE + "x" * 10_000),
    "10,000 character name": Header("X" * 10_000, VALUE),
    "an empty value": Header("X-Api-Key", " "),
    "a colon in a name": Header("X-Api-Key:", VALUE),
}


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
def test_hostile_headers_are_refused_never_quoted_and_never_stored(
    sessions: sessionmaker[Session], settings: Settings, hostile: Header
) -> None:
    with pytest.raises(errors.BadHeaders) as caught:
        _create(sessions, settings, (hostile,))
    assert VALUE not in caught.value.detail
    assert _count(sessions) == 0
    ids = _create(sessions, settings, OWN)
    with pytest.raises(errors.BadHeaders):
        _update(sessions, settings, ids, (hostile,))
    assert _saved(sessions, settings) == OWN


def test_a_header_given_twice_is_refused(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    with pytest.raises(errors.BadHeaders, match=r"^x-api-key is given twice"):
        _create(sessions, settings, (Header("X-Api-Key", "a"), Header("x-api-key", "b")))
    assert _count(sessions) == 0
