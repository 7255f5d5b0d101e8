"""Payloads kept for fewer days, by the command line (issue 34, item 2): ``clubwire prune``
empties them, and ``clubwire delivery`` says so, shows why a delivery was skipped, and
refuses to retry one whose payload expired."""

from __future__ import annotations

import json
import re
from datetime import timedelta

from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.domain.delivering import SkipReason, Status
from clubwire.settings import Settings
from clubwire.storage.models import Delivery
from tests.factories import make_club, make_delivery, make_endpoint
from tests.functional.cli_runner import Invoke, ok, one_line_error


def test_prune_empties_old_payloads_and_the_deliveries_say_so(
    run: Invoke, sessions: sessionmaker[Session], settings: Settings
) -> None:
    now = timestamps.utc_now()
    with sessions.begin() as session:
        club = make_club(session)
        endpoint, _ = make_endpoint(session, club, settings)
        old = make_delivery(session, club, endpoint, now - timedelta(days=3))
        skipped = make_delivery(session, club, endpoint, now, Status.SKIPPED)
        session.execute(
            update(Delivery).where(Delivery.id == skipped).values(skipped_reason=SkipReason.OFF)
        )
    ok(run("club", "payloads", "granite", "--days", "2"))
    assert json.loads(ok(run("prune", "--json")).out)["payloads"] == 1

    shown = ok(run("delivery", "show", old)).out
    assert "Payload      payload expired\n" in shown
    assert "Skipped      -\n" in shown
    listed = ok(run("delivery", "list", "granite")).out
    assert re.search(rf"^{old} .* payload expired$", listed, re.M)
    off = "its endpoint or the club's Webhooks & API module was off"
    assert re.search(rf"^{skipped} .* {off}$", listed, re.M)
    assert f"Skipped      {off}\n" in ok(run("delivery", "show", skipped)).out
    assert "Payload      as published\n" in ok(run("delivery", "show", skipped)).out

    refused = one_line_error(run("delivery", "retry", old))
    assert "(payload expired): it cannot be sent again." in refused
