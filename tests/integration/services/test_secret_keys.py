"""The secret key check and ``rekey`` (services/secret_keys.py) on SQLite and PostgreSQL."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from pydantic import SecretStr
from sqlalchemy import delete, func, select, text
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import custom_headers, sealing
from clubwire.domain.custom_headers import Header
from clubwire.services import endpoints, secret_keys
from clubwire.settings import Settings
from clubwire.storage.models import Endpoint, SecretKeyCheck
from tests.conftest import SECRET_KEY
from tests.factories import EPOCH, make_club, make_endpoint

OTHER_KEY = "another-secret-key-0123456789abcdefghijklmn"
THIRD_KEY = "a-third-secret-key-0123456789abcdefghijklmn"


def _with_key(settings: Settings, key: str) -> Settings:
    return settings.model_copy(update={"secret_key": SecretStr(key)})


def _stored(sessions: sessionmaker[Session]) -> list[str]:
    with sessions() as session:
        return list(session.scalars(select(SecretKeyCheck.sealed)))


def _sealed(sessions: sessionmaker[Session]) -> dict[str, str]:
    with sessions() as session:
        rows = session.execute(select(Endpoint.id, Endpoint.secret_sealed))
        return {endpoint_id: sealed for endpoint_id, sealed in rows}


def _sealed_headers(sessions: sessionmaker[Session]) -> dict[str, str | None]:
    with sessions() as session:
        rows = session.execute(select(Endpoint.id, Endpoint.headers_sealed))
        return {endpoint_id: sealed for endpoint_id, sealed in rows}


def _endpoints(sessions: sessionmaker[Session], settings: Settings, count: int) -> dict[str, str]:
    """``count`` endpoints; their ids and signing secrets."""
    with sessions.begin() as session:
        club = make_club(session)
        made = [make_endpoint(session, club, settings) for _ in range(count)]
        return {endpoint.id: secret for endpoint, secret in made}


def _as_before_the_check(sessions: sessionmaker[Session]) -> None:
    """The database as an older version left it: secrets stored, no check value."""
    with sessions.begin() as session:
        session.execute(delete(SecretKeyCheck))


def _refused(check: Callable[[], object]) -> None:
    with pytest.raises(errors.ConfigurationError, match=r"^CLUBWIRE_SECRET_KEY does not open"):
        check()


def test_a_new_database_takes_the_first_key_and_refuses_any_other(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    secret_keys.check(sessions, settings)
    [stored] = _stored(sessions)
    assert sealing.Sealer(SECRET_KEY).open(stored) == sealing.CHECK_VALUE
    secret_keys.check(sessions, settings)
    _refused(lambda: secret_keys.check(sessions, _with_key(settings, OTHER_KEY)))
    assert _stored(sessions) == [stored]


def test_an_older_database_adopts_the_key_that_opens_its_secrets(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _endpoints(sessions, settings, 1)
    _as_before_the_check(sessions)
    secret_keys.check(sessions, settings)
    [stored] = _stored(sessions)
    assert sealing.Sealer(SECRET_KEY).opens(stored)


def test_an_older_database_refuses_a_key_that_does_not_open_its_secrets(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _endpoints(sessions, settings, 1)
    _as_before_the_check(sessions)
    _refused(lambda: secret_keys.check(sessions, _with_key(settings, OTHER_KEY)))
    assert _stored(sessions) == []
    secret_keys.check(sessions, settings)


def test_processes_starting_together_agree_on_one_key(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    keys = [SECRET_KEY, OTHER_KEY] * 3
    start = threading.Barrier(len(keys))
    passed: list[str] = []
    failed: list[BaseException] = []

    def first_start(key: str) -> None:
        start.wait()
        try:
            secret_keys.check(sessions, _with_key(settings, key))
        except errors.ConfigurationError:
            return
        except BaseException as exc:  # reported below: a thread cannot fail the test itself
            failed.append(exc)
            return
        passed.append(key)

    threads = [threading.Thread(target=first_start, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failed == []
    assert len(passed) == 3
    assert len(set(passed)) == 1, passed
    [stored] = _stored(sessions)
    assert sealing.Sealer(passed[0]).opens(stored)


def test_a_use_case_refuses_to_seal_with_a_wrong_key(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    made = _endpoints(sessions, settings, 1)
    before = _sealed(sessions)
    wrong = _with_key(settings, OTHER_KEY)
    with sessions.begin() as session:
        club = make_club(session, "basalt")
    with sessions.begin() as session:
        _refused(lambda: make_endpoint(session, club, wrong))
    with sessions.begin() as session:
        [endpoint_id] = made
        club_id = endpoints.club_of_endpoint(session, endpoint_id)
        _refused(lambda: endpoints.rotate_secret(session, club_id, endpoint_id, EPOCH, wrong))
    assert _sealed(sessions) == before


def test_rekey_reseals_every_secret_and_the_check(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    made = _endpoints(sessions, settings, 3)
    old, new = sealing.Sealer(SECRET_KEY), sealing.Sealer(OTHER_KEY)
    with sessions.begin() as session:
        assert secret_keys.rekey(session, old, new) == secret_keys.Rekeyed(3)
    assert {id_: new.open(sealed) for id_, sealed in _sealed(sessions).items()} == made
    _refused(lambda: secret_keys.check(sessions, settings))
    secret_keys.check(sessions, _with_key(settings, OTHER_KEY))


def test_rekey_with_a_wrong_old_key_changes_nothing(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _endpoints(sessions, settings, 2)
    before = _sealed(sessions), _stored(sessions)
    with (
        pytest.raises(errors.InvalidInput, match="old key does not open"),
        sessions.begin() as session,
    ):
        secret_keys.rekey(session, sealing.Sealer(THIRD_KEY), sealing.Sealer(OTHER_KEY))
    assert (_sealed(sessions), _stored(sessions)) == before
    secret_keys.check(sessions, settings)


def test_rekey_run_again_changes_nothing(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    _endpoints(sessions, settings, 2)
    old, new = sealing.Sealer(SECRET_KEY), sealing.Sealer(OTHER_KEY)
    with sessions.begin() as session:
        secret_keys.rekey(session, old, new)
    after = _sealed(sessions), _stored(sessions)
    with sessions.begin() as session:
        assert secret_keys.rekey(session, old, new) == secret_keys.Rekeyed(0, already=True)
    assert (_sealed(sessions), _stored(sessions)) == after


@pytest.mark.parametrize(
    ("column", "what"), [("secret_sealed", "signing secret"), ("headers_sealed", "headers")]
)
def test_rekey_leaves_no_mix_when_one_secret_does_not_open(
    sessions: sessionmaker[Session], settings: Settings, column: str, what: str
) -> None:
    """A secret (or headers) sealed with yet another key (by a version before the check):
    all or nothing."""
    made = list(_endpoints(sessions, settings, 3))
    with sessions.begin() as session:
        stray = session.get_one(Endpoint, made[1])
        setattr(stray, column, sealing.Sealer(THIRD_KEY).seal('[["X-Stray","v"]]'))
    before = _sealed(sessions), _sealed_headers(sessions), _stored(sessions)
    with (
        pytest.raises(errors.InvalidInput, match=f"{what} of endpoint {made[1]}: nothing was"),
        sessions.begin() as session,
    ):
        secret_keys.rekey(session, sealing.Sealer(SECRET_KEY), sealing.Sealer(OTHER_KEY))
    assert (_sealed(sessions), _sealed_headers(sessions), _stored(sessions)) == before


def test_rekey_adopts_an_older_database(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    made = _endpoints(sessions, settings, 1)
    _as_before_the_check(sessions)
    new = sealing.Sealer(OTHER_KEY)
    with sessions.begin() as session:
        assert secret_keys.rekey(session, sealing.Sealer(SECRET_KEY), new).secrets == 1
    assert {id_: new.open(sealed) for id_, sealed in _sealed(sessions).items()} == made
    secret_keys.check(sessions, _with_key(settings, OTHER_KEY))


def test_a_creation_waiting_on_a_rekey_is_refused_after_it(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    """While a rekey's transaction is open, a process still on the old key that creates an
    endpoint waits for it, then is refused: it cannot seal a secret the rekey missed."""
    if settings.is_sqlite:
        pytest.skip("SQLite has one writer: the creation waits on its lock, or times out")
    _endpoints(sessions, settings, 1)
    with sessions.begin() as session:
        club = make_club(session, "basalt")
    outcome: list[BaseException] = []

    def create() -> None:
        try:
            with sessions.begin() as session:
                make_endpoint(session, club, settings)
        except BaseException as exc:  # reported below
            outcome.append(exc)

    with sessions.begin() as rekeying:
        secret_keys.rekey(rekeying, sealing.Sealer(SECRET_KEY), sealing.Sealer(OTHER_KEY))
        creating = threading.Thread(target=create)
        creating.start()
        _until_one_waits_on_a_lock(sessions)
    creating.join()
    assert [type(exc) for exc in outcome] == [errors.ConfigurationError]
    with sessions() as session:
        assert session.scalar(select(func.count()).select_from(Endpoint)) == 1


def _until_one_waits_on_a_lock(sessions: sessionmaker[Session]) -> None:
    query = text(
        "SELECT count(*) FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    with sessions() as session:
        for _ in range(10_000):
            if session.execute(query).scalar_one():
                return
            session.rollback()  # a fresh snapshot of the statistics each time
        pytest.fail("the creation never waited for the rekey")


def test_rekey_reseals_the_endpoints_headers_with_their_secrets(
    sessions: sessionmaker[Session], settings: Settings
) -> None:
    made = list(_endpoints(sessions, settings, 2))
    own = (Header("X-Api-Key", "k3y"), Header("Authorization", "Bearer t"))
    with sessions.begin() as session:
        club_id = session.get_one(Endpoint, made[0]).club_id
        endpoints.update_endpoint(session, club_id, made[0], EPOCH, settings, headers=own)
    old, new = sealing.Sealer(SECRET_KEY), sealing.Sealer(OTHER_KEY)
    with sessions.begin() as session:
        assert secret_keys.rekey(session, old, new) == secret_keys.Rekeyed(2)
    resealed = _sealed_headers(sessions)
    assert resealed[made[1]] is None
    assert custom_headers.loads(new.open(resealed[made[0]] or "")) == own
    assert not old.opens(resealed[made[0]] or "")
    with sessions() as session:
        endpoint = session.get_one(Endpoint, made[0])
        assert endpoints.header_names(endpoint, _with_key(settings, OTHER_KEY)) == [
            "X-Api-Key",
            "Authorization",
        ]
