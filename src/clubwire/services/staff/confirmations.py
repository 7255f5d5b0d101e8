"""Confirmations: a page that asks to confirm an action acts once.

The page carries a new token (``new_token``); the action spends it in its own transaction
(``spend``), for the web session that showed the page. A second submission of the same page
(a double click, a form sent again from the browser's history) finds it spent and does
nothing; one that arrives while the first is still running waits for it to end (PostgreSQL's
unique key, SQLite's single writer), then finds its token. Spent tokens go with their web
session.
"""

from __future__ import annotations

import re
import secrets
from datetime import datetime

from sqlalchemy.orm import Session

from clubwire import errors
from clubwire.storage import database
from clubwire.storage.models import Confirmation

_TOKEN = re.compile(r"[A-Za-z0-9_-]{22}")  # what new_token makes
UNREADABLE = "This confirmation cannot be read: preview again, then confirm."


def new_token() -> str:
    return secrets.token_urlsafe(16)


def spend(session: Session, session_id: str, token: str, now: datetime) -> bool:
    """Spend ``token`` for the web session ``session_id``: true the first time, false when
    it was spent already (the caller then does nothing). A token ``new_token`` cannot have
    made is ``InvalidInput``."""
    if not _TOKEN.fullmatch(token):
        raise errors.InvalidInput(UNREADABLE)
    spent = database.insert_if_absent(
        session, Confirmation, session_hash=session_id, token=token, acted_at=now
    )
    return session.scalar(spent.returning(Confirmation.token)) is not None
