"""What the per-request telemetry labels and logs: a small fixed set of families, no secrets."""

from __future__ import annotations

import pytest

from clubwire.web import telemetry


@pytest.mark.parametrize(
    ("path", "family"),
    [
        ("/clubs/granite/api/v1/programs", "api"),
        ("/api/v1/programs", "api"),
        ("/internal/v1/clubs/granite", "internal"),
        ("/settings/granite/webhooks", "ui"),
        ("/", "ui"),
        ("/static/app.css", "ui"),
        ("/metrics", "other"),
        ("/docs", "other"),
    ],
)
def test_each_path_has_a_family(path: str, family: str) -> None:
    assert telemetry.family(path) == family


def test_key_and_secret_shaped_parts_of_a_path_are_cut() -> None:
    key = "cw_live_abcdefghij_" + "s" * 32
    path = f"/clubs/granite/{key}/x/whsec_abcdefabcdef"
    assert telemetry.redacted(path) == "/clubs/granite/cw_live_…/x/whsec_…"
    assert telemetry.redacted("/clubs/granite/api/v1/programs") == "/clubs/granite/api/v1/programs"
