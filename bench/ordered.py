"""The delivery benchmark's ordered runs (``bench/delivery.py --ordered``, issue 35): what
was measured on one database, its target, and its table.

Each round runs the busy club's healthy endpoints ordered, then unordered (the order turning
each round), on the same events: ``game.updated`` over ``--keys`` games, so over as many
ordering keys (``testbed.publish_keyed``). ``OrderedOutcome`` gathers the runs of each way;
beside the best run of each, the median of each round's ordered / unordered (the runs of a
round go seconds apart, so a machine whose speed moves between minutes moves both). The
receiver counts the inversions: a delivery whose envelope ``sequence`` is lower than one
already received for its key at that endpoint. There must be none in the ordered runs; the
unordered runs' show what the order is for. ``report_ordered`` prints one table per
database; after them, the last line of the output is ``ordered ratio <ordered/unordered>
inversions <n>``, the lower ratio of the databases and the ordered runs' inversions in all.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from clubwire.settings import Settings
from measuring import Drain, not_recorded
from report import CPU, DATABASE, WAITED, best, least, met, runs
from testbed import Bed

TARGET_ORDERED_RATIO = 0.5  # issue 35: ordered, 100 keys, at least half the unordered figure


@dataclass
class OrderedOutcome:
    """Every ordered and unordered run on one database, by round."""

    database: str
    ordered: list[Drain] = field(default_factory=list)
    unordered: list[Drain] = field(default_factory=list)
    unrecorded: int = 0  # reached the receiver, yet not recorded as succeeded
    delivered_by_worker: int = 0

    def runs_of(self, ordered: bool) -> list[Drain]:
        return self.ordered if ordered else self.unordered

    @property
    def ratio(self) -> float:
        """The best ordered run's deliveries/s against the best unordered run's."""
        unordered = best(self.unordered).rate
        return best(self.ordered).rate / unordered if unordered else 0.0

    @property
    def round_ratios(self) -> list[float]:
        """Each round's ordered run against the unordered run of the same round."""
        pairs = zip(self.ordered, self.unordered, strict=True)
        return [ordered.rate / unordered.rate for ordered, unordered in pairs if unordered.rate]

    @property
    def ratio_met(self) -> bool:
        return self.ratio >= TARGET_ORDERED_RATIO

    @property
    def inversions(self) -> int:
        """Inversions in the ordered runs (there must be none)."""
        return sum(drain.inversions for drain in self.ordered)

    @property
    def lost(self) -> int:
        return sum(drain.lost for drain in [*self.ordered, *self.unordered])

    def check_records(self, bed: Bed, delivered: frozenset[str]) -> None:
        """After a worker stopped: count what it delivered but did not record."""
        self.delivered_by_worker += len(delivered)
        self.unrecorded += not_recorded(bed, delivered)


def report_ordered_setup(events: int, endpoints: int, keys: int, rounds: int) -> None:
    settings = Settings(_env_file=None)
    print(
        f"ordered: {events:,} game.updated events over {keys} games (ordering keys) × "
        f"{endpoints} endpoints = {events * endpoints:,} deliveries, published before the "
        "worker starts, the endpoints ordered, then the same events with them unordered; "
        "deliveries/s = deliveries / (last arrival − first arrival) at the receiver; "
        f"{rounds} alternating rounds"
    )
    print(
        f"one worker process (uvloop), {settings.max_in_flight} in flight, "
        f"{settings.max_in_flight_per_endpoint} per endpoint; inversions counted at the "
        "receiver: deliveries that arrived after a higher sequence of their key"
    )


def report_ordered(outcome: OrderedOutcome) -> None:
    """One table per database: the best run of each way, every run, and the target."""
    o = outcome
    target = f"target ≥ {TARGET_ORDERED_RATIO}: {met(o.ratio_met)}"
    rows = [
        ("deliveries/s, ordered", f"{best(o.ordered).rate:,.0f}", runs(o.ordered)),
        ("deliveries/s, unordered", f"{best(o.unordered).rate:,.0f}", runs(o.unordered)),
        ("ratio ord./unordered", f"{o.ratio:.2f}", target),
        ("ratio, by round", *ratio_by_round(o)),
        ("inversions, ordered", f"{o.inversions:,}", inversions_note(o.ordered, "target 0")),
        ("inversions, unordered", *unordered_inversions(o)),
        ("CPU µs per delivery", *per_delivery(o, CPU, "the worker's CPU time")),
        ("+ database's CPU", *per_delivery(o, DATABASE, "the database's server processes", DB)),
        ("waited for a CPU", *per_delivery(o, WAITED, "the worker's loop runnable, not running")),
        ("not recorded", f"{o.unrecorded:,}", unrecorded_note(o)),
    ]
    print(f"\n{o.database}, ordered")
    for label, value, note in rows:
        print(f"  {label:<23} {value:>10}   {note}")


def ratio_by_round(outcome: OrderedOutcome) -> tuple[str, str]:
    ratios = outcome.round_ratios
    shown = " · ".join(f"{ratio:.2f}" for ratio in ratios)
    median = f"{statistics.median(ratios):.2f}" if ratios else "-"
    return median, f"median of each round's ordered / unordered: {shown}"


def inversions_note(drains: list[Drain], target: str | None = None) -> str:
    shown = " · ".join(f"{drain.inversions:,}" for drain in drains)
    if target is None:
        return f"by run: {shown}"
    done = not any(drain.inversions for drain in drains)
    return f"{target}: {met(done)}; by run: {shown}"


def unordered_inversions(outcome: OrderedOutcome) -> tuple[str, str]:
    found = sum(drain.inversions for drain in outcome.unordered)
    return f"{found:,}", f"{inversions_note(outcome.unordered)} (what the order prevents)"


DB = "none apart: the database works inside the worker, in its CPU above"


def per_delivery(
    outcome: OrderedOutcome,
    seconds: Callable[[Drain], float | None],
    what: str,
    unknown: str = "unknown (no /proc)",
) -> tuple[str, str]:
    """The least of the ordered and of the unordered runs' ``seconds`` per delivery, in µs
    (``unknown``: what it means that there is none)."""
    ordered, unordered = least(outcome.ordered, seconds), least(outcome.unordered, seconds)
    if ordered is None or unordered is None:
        return "-", unknown
    return f"{ordered:.0f} / {unordered:.0f}", f"{what}, per delivery, ordered / unordered"


def unrecorded_note(outcome: OrderedOutcome) -> str:
    if not outcome.unrecorded:
        return f"all {outcome.delivered_by_worker:,} the worker delivered are recorded"
    return f"of {outcome.delivered_by_worker:,} the worker delivered: it lost these results"
