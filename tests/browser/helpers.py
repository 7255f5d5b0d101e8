"""What browser tests share: signing in, and screenshots for the docs."""

from __future__ import annotations

import os
from pathlib import Path

from playwright.sync_api import Page, expect
from sqlalchemy.orm import Session, sessionmaker

from tests.factories import make_club, make_staff

SIGN_IN_PATH = "/sign-in"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"


def granite_with_staff(sessions: sessionmaker[Session], email: str) -> None:
    """The Granite Curling Club, and ``email`` on its staff (password ``ui_pages.PASSWORD``)."""
    with sessions.begin() as session:
        make_club(session, "granite", name="Granite Curling Club")
    make_staff(sessions, email, clubs=["granite"])


def sign_in(
    page: Page, base_url: str, email: str, password: str, *, path: str = SIGN_IN_PATH
) -> None:
    """Sign in through the form, and check that it let us in (the form is gone)."""
    page.goto(f"{base_url}{path}")
    page.get_by_label("Email", exact=True).fill(email)
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_load_state()
    expect(page.get_by_label("Password", exact=True)).to_have_count(0)


def screenshot(page: Page, name: str, *, full_page: bool = True) -> Path | None:
    """Save ``docs/screenshots/<name>.png``, only when ``CLUBWIRE_SCREENSHOTS=1``.

    Normal test runs leave the tree alone; ``CLUBWIRE_SCREENSHOTS=1 pytest tests/browser``
    refreshes the pictures the docs show.
    """
    if os.environ.get("CLUBWIRE_SCREENSHOTS") != "1":
        return None
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=path, full_page=full_page)
    return path


def assert_fits_a_phone(page: Page) -> None:
    """The page is laid out at the phone's width and never needs scrolling sideways.

    A phone context (``is_mobile``) lays a page without ``<meta name="viewport"
    content="width=device-width, initial-scale=1">`` out at 980 px and shrinks it to fit; with
    it, content wider than the screen widens ``innerWidth``, so the layout width is read from
    ``clientWidth``.
    """
    viewport = page.viewport_size
    assert viewport is not None
    layout, content = page.evaluate(
        "[document.documentElement.clientWidth, document.documentElement.scrollWidth]"
    )
    assert layout == viewport["width"], (
        f"laid out at {layout} px on a {viewport['width']} px screen: is the viewport meta missing?"
    )
    assert content <= layout, f"{content} px wide on a {layout} px screen: it scrolls sideways"
