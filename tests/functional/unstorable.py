"""What the tests of text the database cannot hold share: the bad characters, JSON that
carries them, a count of every table a refused request could have written to, and the check
that nothing was logged with a traceback."""

from __future__ import annotations

import logging
from typing import Any

import orjson
import pytest
from sqlalchemy import func, select
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog
from clubwire.storage import models
from tests.factories import EPOCH

# What a client can send: NUL, and a lone surrogate (as a JSON escape, or as the bytes of a
# command line argument that are not UTF-8, which Python hands over as lone surrogates).
NUL = "\x00"
SURROGATE = "\udcff"
BAD = [pytest.param(NUL, id="nul"), pytest.param(SURROGATE, id="surrogate")]

NUL_REFUSED = "must not contain NUL characters (\\u0000)"
SURROGATE_REFUSED = "must be valid Unicode text (it holds a lone surrogate or an undecodable byte)"
REFUSED = {NUL: NUL_REFUSED, SURROGATE: SURROGATE_REFUSED}

# Where a test puts the bad character in a value before it is written as JSON.
MARK = "\ue000"
_ESCAPES = {NUL: "\\u0000", SURROGATE: "\\udcff"}

_TABLES = (
    models.Club,
    models.Program,
    models.ApiKey,
    models.Endpoint,
    models.Event,
    models.Delivery,
    models.User,
    models.SignInFailure,
)


def json_with(value: object, bad: str) -> bytes:
    """``value`` as JSON, each ``MARK`` in its strings written as the escape of ``bad``
    (which a JSON library would not write: a lone surrogate is not valid Unicode)."""
    return orjson.dumps(value).decode().replace(MARK, _ESCAPES[bad]).encode()


def member_update(name: str) -> dict[str, Any]:
    """The ``data`` of a ``member.updated`` event for a member of this name."""
    data: dict[str, Any] = event_catalog.sample("member.updated", EPOCH)
    data["member"]["name"] = name
    return data


def rows(sessions: sessionmaker[Session]) -> dict[str, int]:
    """How many rows each table holds that a request could have written to."""
    with sessions() as session:
        return {model.__tablename__: _count(session, model) for model in _TABLES}


def _count(session: Session, model: type[models.Base]) -> int:
    return session.scalar(select(func.count()).select_from(model)) or 0


def no_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """Nothing was logged as an error, and nothing with a traceback."""
    faults = [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert faults == [], [r.getMessage() for r in faults]
