"""An endpoint's headers of its own (issue 33, item 4) arrive at a real TLS receiver byte for
byte, beside ours, on a delivery a worker makes and on a Send test, and still do after the
secret key that seals them is rotated."""

from __future__ import annotations

import asyncio

from pydantic import SecretStr
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import delivering
from clubwire.domain.custom_headers import Header
from clubwire.domain.sealing import Sealer
from clubwire.services import endpoints, secret_keys
from clubwire.services.delivery import attempts, pings
from clubwire.settings import Settings
from clubwire.storage.models import Endpoint
from tests.factories import EPOCH
from tests.functional.workers import (
    add_endpoint,
    deliver_until,
    delivery_statuses,
    publish_registrations,
)
from tests.receiver import Received, Receiver

# Every character a value may hold, a name in lower case: sent exactly as given.
OWN = (
    Header("X-Api-Key", "k3y ~!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}"),
    Header("authorization", "Bearer abc.DEF-123"),
)
SENT = [(found.name.encode(), found.value.encode()) for found in OWN]
NEW_KEY = "a-new-secret-key-0123456789abcdefghijklmnop"


def _endpoint_with_headers(
    sessions: sessionmaker[Session], hooks: Settings, url: str
) -> tuple[str, str]:
    """An endpoint with the headers ``OWN``; its club's id and its own."""
    endpoint_id, _ = add_endpoint(sessions, hooks, url)
    with sessions.begin() as session:
        club_id = session.get_one(Endpoint, endpoint_id).club_id
        endpoints.update_endpoint(session, club_id, endpoint_id, EPOCH, hooks, headers=OWN)
    return club_id, endpoint_id


def _own(arrived: Received) -> list[tuple[bytes, bytes]]:
    """The headers of ``OWN``'s names that arrived, each as it came."""
    names = {name for name, _ in SENT}
    return [(name, value) for name, value in arrived.raw_headers if name in names]


def _names(arrived: Received) -> list[bytes]:
    return [name.lower() for name, _ in arrived.raw_headers]


def _send_test(
    hooks: Settings, sessions: sessionmaker[Session], club_id: str, endpoint_id: str
) -> delivering.Result:
    async def send() -> delivering.Result:
        async with attempts.attempter(hooks) as sends:
            return await pings.send_test(hooks, sessions, sends, club_id, endpoint_id)

    return asyncio.run(send())


def test_headers_arrive_byte_for_byte_on_a_delivery_and_a_send_test(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    club_id, endpoint_id = _endpoint_with_headers(sessions, hooks, receiver.url)
    publish_registrations(sessions)
    deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("succeeded", 1)])
    assert _send_test(hooks, sessions, club_id, endpoint_id).ok
    delivery, ping = receiver.wait_for(2)
    for arrived in (delivery, ping):
        assert _own(arrived) == SENT
        for ours in (b"content-type", b"user-agent", b"x-service-event", b"webhook-signature"):
            assert _names(arrived).count(ours) == 1
        assert arrived.headers["Content-Type"] == "application/json"
    assert delivery.headers["X-Service-Event"] == "registration.created"
    assert ping.headers["X-Service-Event"] == "ping"


def test_a_change_is_sent_from_the_next_delivery_on(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    club_id, endpoint_id = _endpoint_with_headers(sessions, hooks, receiver.url)
    with sessions.begin() as session:
        replaced = (Header("X-API-KEY", "rotated"),)
        endpoints.update_endpoint(
            session, club_id, endpoint_id, EPOCH, hooks, headers=replaced, removed=["Authorization"]
        )
    publish_registrations(sessions)
    deliver_until(hooks, sessions, lambda: delivery_statuses(sessions) == [("succeeded", 1)])
    (arrived,) = receiver.wait_for(1)
    assert [(n, v) for n, v in arrived.raw_headers if n.lower() == b"x-api-key"] == [
        (b"X-API-KEY", b"rotated")
    ]
    assert b"authorization" not in _names(arrived)


def test_headers_still_arrive_after_the_secret_key_is_rotated(
    sessions: sessionmaker[Session], hooks: Settings, receiver: Receiver
) -> None:
    _endpoint_with_headers(sessions, hooks, receiver.url)
    with sessions.begin() as session:
        secret_keys.rekey(session, Sealer(hooks.secret_key_value()), Sealer(NEW_KEY))
    rekeyed = hooks.model_copy(update={"secret_key": SecretStr(NEW_KEY)})
    publish_registrations(sessions)
    deliver_until(rekeyed, sessions, lambda: delivery_statuses(sessions) == [("succeeded", 1)])
    (arrived,) = receiver.wait_for(1)
    assert _own(arrived) == SENT
