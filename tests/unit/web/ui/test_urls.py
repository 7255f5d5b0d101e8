"""The settings area's URLs, as its redirects build them, and which paths are its own."""

from __future__ import annotations

import pytest

from clubwire.storage.models import Club
from clubwire.web.ui import urls

CLUB = Club(slug="granite", name="Granite Curling Club")


def test_the_tabs_are_built_from_the_routes_paths() -> None:
    assert urls.club_url(CLUB) == "/settings/granite"
    assert urls.webhooks_url(CLUB) == "/settings/granite/webhooks"
    assert urls.webhooks_url(CLUB, "ep_1") == "/settings/granite/webhooks#endpoint-ep_1"
    assert urls.emails_url(CLUB) == "/settings/granite/webhooks#failure-emails"
    assert urls.api_keys_url(CLUB) == "/settings/granite/api-keys"
    assert urls.api_keys_url(CLUB, "abc123") == "/settings/granite/api-keys#key-abc123"
    assert urls.admin_url("granite") == "/admin#club-granite"


def test_sign_in_carries_where_to_go_back_to() -> None:
    assert urls.sign_in_url(None) == "/sign-in"
    assert urls.sign_in_url("/settings/granite?a=b c") == (
        "/sign-in?next=/settings/granite%3Fa%3Db%20c"
    )


@pytest.mark.parametrize(
    ("path", "ours"),
    [
        ("/", True),
        ("/sign-in", True),
        ("/sign-out", True),
        ("/settings", True),
        ("/settings/granite/webhooks", True),
        ("/admin", True),
        ("/static/clubwire.css", True),
        ("/clubs/granite/api/v1/programs", False),
        ("/internal/v1/clubs", False),
        ("/metrics", False),
    ],
)
def test_the_area_is_known_by_its_paths(path: str, ours: bool) -> None:
    assert urls.is_ui_path(path) is ours
