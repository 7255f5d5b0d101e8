"""The endpoint form says what each event kind means in plain words, from the catalog
(issue 15, item 5), on Add and on Edit."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator

import pytest
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import event_catalog
from clubwire.services import clubs
from clubwire.settings import Settings
from tests.factories import make_club, make_endpoint, make_staff, receiver_settings
from tests.functional.ui_pages import Browser, browser

ADMIN = "admin@granite.example"
TAB = "/settings/granite/webhooks"


@pytest.fixture
def hooks(settings: Settings) -> Settings:
    return receiver_settings(settings)


@pytest.fixture
def web(hooks: Settings, sessions: sessionmaker[Session]) -> Iterator[Browser]:
    with sessions.begin() as session:
        make_club(session, "granite")
    make_staff(sessions, ADMIN, clubs=["granite"])
    with browser(hooks) as web:
        web.sign_in(ADMIN)
        yield web


def _described(page: str, form: str, kind: str) -> str:
    """The words the checkbox of ``kind`` in the form ``form`` is described by."""
    option = f"{form}-events-{kind.replace('.', '-').replace('_', '-')}"
    box = re.search(rf'<input type="checkbox" id="{option}"[^>]*>', page)
    assert box is not None, f"no checkbox {option}"
    assert f'aria-describedby="{option}-words"' in box.group(0)
    words = re.search(rf'<span class="hint" id="{option}-words">([^<]*)</span>', page)
    assert words is not None
    return html.unescape(words.group(1))


def test_the_add_and_edit_forms_say_each_kind_in_plain_words(
    web: Browser, sessions: sessionmaker[Session], hooks: Settings
) -> None:
    with sessions.begin() as session:
        endpoint, _ = make_endpoint(session, clubs.get_club(session, "granite"), hooks)
        edit = f"{TAB}/{endpoint.id}/edit"
    for page, form in ((web.get(TAB).text, "new-endpoint"), (web.get(edit).text, "endpoint")):
        for kind in event_catalog.SUBSCRIBABLE:
            assert _described(page, form, kind) == event_catalog.FOR_STAFF[kind]
        shown = re.findall(r'-words">([^<]*)</span>', page)
        assert len(shown) == len(event_catalog.SUBSCRIBABLE)  # and not ping's
