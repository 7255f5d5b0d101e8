"""Webhook endpoints: URL rules, subscriptions, limits, switching, rotation, secrets at rest."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from ipaddress import ip_address
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import addresses, max_rates, off_reasons
from clubwire.domain.sealing import Sealer
from clubwire.services import endpoints
from clubwire.settings import Settings
from clubwire.storage.models import Club, Endpoint
from tests.conftest import make_settings
from tests.factories import EPOCH, make_club, make_endpoint, receiver_settings
from tests.ranges import NON_GLOBAL_V4, NON_GLOBAL_V6
from tests.spellings import spelled


def _count(session: Session) -> int:
    return session.scalar(select(func.count()).select_from(Endpoint)) or 0


def test_create_returns_the_secret_once_and_stores_it_sealed(
    session: Session, settings: Settings
) -> None:
    endpoint, secret = make_endpoint(session, make_club(session), settings)
    session.commit()
    assert endpoint.id.startswith("we_")
    assert secret.startswith("whsec_")
    assert len(secret) >= 6 + 32
    stored = session.execute(text("SELECT * FROM endpoints")).one()
    assert all(secret not in str(column) for column in stored)
    assert Sealer(settings.secret_key_value()).open(endpoint.secret_sealed) == secret
    assert secret not in str(endpoints.describe(endpoint, settings))


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://hooks.example.com/x", "https"),
        ("https://user:pw@hooks.example.com/x", "user"),
        ("https://hooks.example.com/" + "x" * 2050, "2048"),
        ("https://127.0.0.1/x", "127.0.0.1"),
        ("https://10.1.2.3/x", "10.1.2.3"),
        ("https://[::1]/x", "::1"),
        ("https://2130706433/x", "127.0.0.1"),
        ("https://0x7f.1/x", "127.0.0.1"),
        ("https://169.254.169.254/latest/meta-data", "169.254.169.254"),
    ],
)
def test_unsafe_urls_are_refused_with_a_specific_reason(
    session: Session, settings: Settings, url: str, message: str
) -> None:
    club = make_club(session)
    with pytest.raises(errors.InvalidInput, match=message.replace(".", r"\.")):
        endpoints.create_endpoint(session, club, url, ["registration.created"], EPOCH, settings)
    assert _count(session) == 0


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("https://🯱🯰.🯰.🯰.🯱/x", "10.0.0.1"),
        ("https://127。0。0。1/x", "127.0.0.1"),
        ("https://１６９．２５４．１６９．２５４/latest/meta-data", "169.254.169.254"),
        ("https://[::ｆｆｆｆ:１２７.0.0.1]/x", "::ffff:127.0.0.1"),
    ],
)
def test_spelled_addresses_are_refused_when_saved(
    session: Session, settings: Settings, url: str, address: str
) -> None:
    club = make_club(session)
    with pytest.raises(errors.InvalidInput, match=f"^{address} is not a public address$"):
        endpoints.create_endpoint(session, club, url, ["registration.created"], EPOCH, settings)
    assert _count(session) == 0


@pytest.mark.parametrize(("address", "host"), spelled(NON_GLOBAL_V4 + NON_GLOBAL_V6))
def test_every_spelled_non_public_address_is_refused_without_a_lookup(
    tmp_path: Path, address: str, host: str
) -> None:
    """The save-time check judges what the client will connect to; a literal is never
    looked up."""
    lookups: list[str] = []

    def resolve(name: str, _port: int) -> list[str]:
        lookups.append(name)
        return ["93.184.215.14"]

    settings = make_settings(f"sqlite:///{tmp_path / 'unused.db'}", tmp_path)
    shown = addresses.display(ip_address(address))
    with pytest.raises(errors.InvalidInput) as caught:
        endpoints.check_url(f"https://{host}/x", settings, resolve)
    assert caught.value.detail == f"{shown} is not a public address"
    assert lookups == []


def test_a_spelled_name_is_looked_up_as_the_client_reads_it(
    session: Session, settings: Settings
) -> None:
    lookups: list[str] = []

    def resolve(name: str, _port: int) -> list[str]:
        lookups.append(name)
        return ["127.0.0.1"]

    club = make_club(session)
    with pytest.raises(errors.InvalidInput, match=r"^hooks\.example resolves only to non-public"):
        endpoints.create_endpoint(
            session,
            club,
            "https://ＨＯＯＫＳ\u3002example/x",
            ["registration.created"],
            EPOCH,
            settings,
            resolve=resolve,
        )
    assert lookups == ["hooks.example"]
    assert _count(session) == 0


def test_a_host_resolving_only_to_private_addresses_is_refused(
    session: Session, settings: Settings
) -> None:
    club = make_club(session)
    with pytest.raises(errors.InvalidInput, match="resolves only to non-public"):
        endpoints.create_endpoint(
            session,
            club,
            "https://intranet.example/x",
            ["registration.created"],
            EPOCH,
            settings,
            resolve=lambda _host, _port: ["10.0.0.7", "192.168.1.1"],
        )


def test_a_host_with_a_public_address_is_accepted(session: Session, settings: Settings) -> None:
    club = make_club(session)
    endpoint, _ = endpoints.create_endpoint(
        session,
        club,
        "https://hooks.example/x",
        ["registration.created"],
        EPOCH,
        settings,
        resolve=lambda _host, _port: ["10.0.0.7", "93.184.215.14"],
    )
    assert endpoint.url == "https://hooks.example/x"


@pytest.mark.parametrize(
    ("kinds", "message"),
    [([], "at least one"), (["ping"], "ping cannot"), (["registration.deleted"], "Unknown event")],
)
def test_bad_subscriptions_are_refused(
    session: Session, settings: Settings, kinds: list[str], message: str
) -> None:
    club = make_club(session)
    with pytest.raises(errors.InvalidInput, match=message):
        endpoints.create_endpoint(
            session, club, "https://127.0.0.1/x", kinds, EPOCH, receiver_settings(settings)
        )


def test_events_are_kept_in_catalogue_order(session: Session, settings: Settings) -> None:
    endpoint, _ = make_endpoint(
        session,
        make_club(session),
        settings,
        kinds=("member.updated", "registration.created", "member.updated"),
    )
    assert endpoint.events.split() == ["registration.created", "member.updated"]


def test_a_club_has_at_most_the_configured_number_of_endpoints(
    session: Session, settings: Settings
) -> None:
    club = make_club(session)
    few = receiver_settings(settings, max_endpoints_per_club=2)
    for _ in range(2):
        endpoints.create_endpoint(
            session, club, "https://127.0.0.1/x", ["member.updated"], EPOCH, few
        )
    with pytest.raises(errors.InvalidInput, match="at most 2"):
        endpoints.create_endpoint(
            session, club, "https://127.0.0.1/x", ["member.updated"], EPOCH, few
        )


def test_racing_creations_cannot_pass_the_limit(
    sessions: sessionmaker[Session], settings: Settings, database_url: str
) -> None:
    """Two creations at once with room for one: the second waits for the first, then is
    refused (PostgreSQL; SQLite lets one writer at a time through)."""
    if not database_url.startswith("postgresql"):
        pytest.skip("concurrent writers are PostgreSQL's")
    one = receiver_settings(settings, max_endpoints_per_club=1)
    with sessions.begin() as session:
        club_id = make_club(session).id

    def create(session: Session) -> None:
        club = session.get_one(Club, club_id)
        url = "https://127.0.0.1/x"
        endpoints.create_endpoint(session, club, url, ["member.updated"], EPOCH, one)

    with sessions() as first, sessions() as second, ThreadPoolExecutor(1) as pool:
        create(first)
        racing = pool.submit(create, second)
        with pytest.raises(TimeoutError):
            racing.result(timeout=0.5)  # it waits for the first creation's lock
        first.commit()
        with pytest.raises(errors.InvalidInput, match="at most 1"):
            racing.result(timeout=10)
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Endpoint)) == 1


def test_another_clubs_endpoint_is_not_found(session: Session, settings: Settings) -> None:
    granite = make_club(session, "granite")
    marble = make_club(session, "marble")
    theirs, _ = make_endpoint(session, marble, settings)
    for action in (
        lambda: endpoints.get_endpoint(session, granite.id, theirs.id),
        lambda: endpoints.disable_endpoint(
            session, granite.id, theirs.id, EPOCH, off_reasons.OffReason.STAFF
        ),
        lambda: endpoints.delete_endpoint(session, granite.id, theirs.id),
        lambda: endpoints.rotate_secret(session, granite.id, theirs.id, EPOCH, settings),
    ):
        with pytest.raises(errors.NotFound):
            action()
    assert theirs.enabled


def test_update_changes_url_and_events(session: Session, settings: Settings) -> None:
    club = make_club(session)
    endpoint, _ = make_endpoint(session, club, settings)
    changed = endpoints.update_endpoint(
        session,
        club.id,
        endpoint.id,
        EPOCH,
        receiver_settings(settings),
        url="https://127.0.0.2/new",
        kinds=["game.updated"],
    )
    assert (changed.url, changed.events) == ("https://127.0.0.2/new", "game.updated")
    with pytest.raises(errors.InvalidInput, match="https"):
        endpoints.update_endpoint(
            session, club.id, endpoint.id, EPOCH, settings, url="http://x.example"
        )


def test_disable_and_enable(session: Session, settings: Settings) -> None:
    club = make_club(session)
    endpoint, _ = make_endpoint(session, club, settings)
    endpoint.dead_in_a_row = 3
    endpoints.disable_endpoint(session, club.id, endpoint.id, EPOCH, off_reasons.OffReason.STAFF)
    assert (endpoint.enabled, endpoint.disabled_reason, endpoint.disabled_at) == (
        False,
        "staff",
        EPOCH,
    )
    _, resent = endpoints.enable_endpoint(session, club.id, endpoint.id, EPOCH)
    assert (endpoint.enabled, endpoint.dead_in_a_row, endpoint.disabled_reason, resent) == (
        True,
        0,
        None,
        0,
    )


def test_rotate_secret_replaces_it(session: Session, settings: Settings) -> None:
    club = make_club(session)
    endpoint, old = make_endpoint(session, club, settings)
    new = endpoints.rotate_secret(session, club.id, endpoint.id, EPOCH, settings)
    assert new != old
    assert Sealer(settings.secret_key_value()).open(endpoint.secret_sealed) == new


def test_the_system_resolver_is_asked_by_default(session: Session, settings: Settings) -> None:
    club = make_club(session)
    with pytest.raises(errors.InvalidInput, match=r"localhost resolves only to .*127\.0\.0\.1"):
        endpoints.create_endpoint(
            session, club, "https://localhost/x", ["member.updated"], EPOCH, settings
        )


def _saved_rate(sessions: sessionmaker[Session], endpoint_id: str) -> int | None:
    """The max rate as stored, read back in a session of its own."""
    with sessions() as session:
        return session.get_one(Endpoint, endpoint_id).max_rate


def test_a_max_rate_is_set_changed_kept_and_cleared(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    hooks = receiver_settings(settings)
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = endpoints.create_endpoint(
            session, club, "https://127.0.0.1/x", ["member.updated"], EPOCH, hooks, max_rate=20
        )
        club_id, endpoint_id = club.id, endpoint.id
        assert endpoints.describe(endpoint, hooks)["maxRate"] == 20
    assert _saved_rate(sessions, endpoint_id) == 20
    for change, saved in [(1000, 1000), (None, 1000), (max_rates.NO_LIMIT, None), (None, None)]:
        with sessions.begin() as session:
            changed = endpoints.update_endpoint(
                session, club_id, endpoint_id, EPOCH, hooks, kinds=["game.updated"], max_rate=change
            )
            assert endpoints.describe(changed, hooks)["maxRate"] == saved
        assert _saved_rate(sessions, endpoint_id) == saved


def test_an_endpoint_starts_without_a_max_rate(session: Session, settings: Settings) -> None:
    endpoint, _ = make_endpoint(session, make_club(session), settings)
    session.commit()
    assert endpoint.max_rate is None
    assert endpoints.describe(endpoint, settings)["maxRate"] is None
    assert session.scalar(text("SELECT max_rate FROM endpoints")) is None


@pytest.mark.parametrize(
    ("rate", "message"),
    [
        (0, "^0 is not a max rate: the lowest is 1 delivery per second.$"),
        (-5, "the lowest is 1"),
        (1001, "^1001 is not a max rate: the highest is 1000 deliveries per second.$"),
        (2**63, "the highest is 1000"),
    ],
)
def test_a_max_rate_out_of_range_is_refused_and_nothing_changes(
    session: Session, settings: Settings, rate: int, message: str
) -> None:
    club = make_club(session)
    hooks = receiver_settings(settings)
    with pytest.raises(errors.InvalidInput, match=message):
        endpoints.create_endpoint(
            session, club, "https://127.0.0.1/x", ["member.updated"], EPOCH, hooks, max_rate=rate
        )
    assert _count(session) == 0
    endpoint, _ = make_endpoint(session, club, settings)
    with pytest.raises(errors.InvalidInput, match=message):
        endpoints.update_endpoint(
            session, club.id, endpoint.id, EPOCH, hooks, url="https://127.0.0.2/y", max_rate=rate
        )
    session.commit()
    assert (endpoint.url, endpoint.max_rate) == ("https://127.0.0.1:9/hooks", None)


@pytest.mark.parametrize(
    ("typed", "read"),
    [
        ("", max_rates.NO_LIMIT),
        ("none", max_rates.NO_LIMIT),
        ("7", 7),
        (12, 12),
        (max_rates.NO_LIMIT, max_rates.NO_LIMIT),
    ],
)
def test_read_max_rate_takes_numbers_and_typed_text(
    typed: max_rates.MaxRate | str, read: max_rates.MaxRate
) -> None:
    assert endpoints.read_max_rate(typed) == read


@pytest.mark.parametrize("typed", ["1e9", "-1", " 5 ", "５", "5\x00", "9" * 10_000])
def test_read_max_rate_refuses_hostile_text_as_invalid_input(typed: str) -> None:
    with pytest.raises(errors.InvalidInput, match="is not a max rate: "):
        endpoints.read_max_rate(typed)
