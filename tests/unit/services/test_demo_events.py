"""The demo's events: valid for their kind, and about the demo club's programs on sale."""

from __future__ import annotations

import random

import pytest

from clubwire.domain import event_catalog
from clubwire.services import demo
from tests.factories import EPOCH

NOT_ON_SALE = {"board-retreat", "spring-bonspiel", "fall-league-2025"}


@pytest.mark.parametrize("kind", event_catalog.SUBSCRIBABLE)
def test_demo_events_are_valid_and_about_the_demo_programs(kind: str) -> None:
    rng = random.Random(kind)
    for _ in range(50):
        data = event_catalog.validate(kind, demo.event_data(kind, EPOCH, rng))
        program = getattr(data, "program", None)
        if program is not None:
            assert program.id not in NOT_ON_SALE
            assert not program.id.startswith("prg_")  # not the catalog's own sample programs
