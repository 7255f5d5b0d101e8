"""The delivery benchmark's report: the outcome on each database, its targets, and the tables.

``Outcome`` gathers what was measured on one database, every run of each kind; the best run of
each kind counts, and is held to the targets below. Beside the ratio of the best runs, and
the silent endpoint's change between the best runs, the median of each round's (the runs
of a round go seconds apart): on a shared machine whose speed moves by 20-30 % from one
minute to the next, the steadier of the two for comparing builds (ADR 0008, session 17).
``report`` prints one table per database, and after it the lines ``throttling change
<±x.x> %``, ``backlog <N> change
<±x.x> %`` (with ``--backlog``) and ``workers <N> change <±x.x> % duplicates <n>`` (with
``--workers``, PostgreSQL) for scripts to read.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter

from clubwire.settings import Settings
from measuring import LIGHT_EVENTS, LIGHT_INTERVAL, Drain, Light, not_recorded
from receiver import SILENT, THROTTLING
from testbed import Bed

TARGET_RATIO = 0.6  # issue 12 (the goal is 0.7)
TARGET_P50_MS = 20.0  # issue 12
TARGET_SILENT_DROP = 5.0  # per cent (issue 12)
TARGET_THROTTLING_DROP = 5.0  # per cent, beside an endpoint answering 429 to half (issue 33)
TARGET_BACKLOG_DROP = 5.0  # per cent, with a dead endpoint's backlog beside (issue 12)


# -- one database -----------------------------------------------------------------------------


@dataclass
class Outcome:
    """Everything measured on one database: each throughput run, by round."""

    database: str
    ours: list[Drain] = field(default_factory=list)
    bare: list[Drain] = field(default_factory=list)
    silent: list[Drain] = field(default_factory=list)
    throttling: list[Drain] = field(default_factory=list)  # beside 429 to every other request
    backlog: list[Drain] = field(default_factory=list)  # with a dead endpoint's backlog
    backlog_size: int = 0
    workers: list[Drain] = field(default_factory=list)  # several workers at once
    worker_count: int = 1
    light: Light = field(default_factory=lambda: Light([], frozenset()))
    unrecorded: int = 0  # reached the receiver, yet not recorded as succeeded
    delivered_by_worker: int = 0

    def runs_beside(self, neighbour: str | None) -> list[Drain]:
        """The runs with the neighbour of that role on (None: alone)."""
        return {None: self.ours, SILENT: self.silent, THROTTLING: self.throttling}[neighbour]

    @property
    def ratio(self) -> float:
        bare = best(self.bare).rate
        return best(self.ours).rate / bare if bare else 0.0

    @property
    def round_ratios(self) -> list[float]:
        """Each round's worker against the bare sender of the same round: run seconds apart,
        so that a machine whose speed moves between rounds moves both sides."""
        pairs = zip(self.ours, self.bare, strict=True)
        return [ours.rate / bare.rate for ours, bare in pairs if bare.rate]

    @property
    def silent_change(self) -> float:
        """The healthy endpoints' deliveries/s with a silent endpoint, change in %."""
        return change(self.silent, self.ours)

    @property
    def throttling_change(self) -> float:
        """The healthy endpoints' deliveries/s beside the throttling endpoint, change in %."""
        return change(self.throttling, self.ours)

    @property
    def round_throttling_changes(self) -> list[float]:
        """Each round's run beside the throttling endpoint against the run without it."""
        return round_changes(self.throttling, self.ours)

    @property
    def backlog_change(self) -> float:
        """The healthy endpoints' deliveries/s beside the dead backlog, change in %."""
        return change(self.backlog, self.ours)

    @property
    def workers_change(self) -> float:
        """Several workers' deliveries/s together against one worker's, change in %."""
        return change(self.workers, self.ours)

    @property
    def round_silent_changes(self) -> list[float]:
        """Each round's run with the silent endpoint against the run without it in the same
        round, change in %: the steadier comparison, as for the ratio."""
        return round_changes(self.silent, self.ours)

    @property
    def round_worker_changes(self) -> list[float]:
        """Each round's several workers against the one worker of the same round, change in
        %: the steadier comparison, as for the ratio."""
        return round_changes(self.workers, self.ours)

    @property
    def ratio_met(self) -> bool:
        return self.ratio >= TARGET_RATIO

    @property
    def p50_met(self) -> bool:
        return self.percentile(50) < TARGET_P50_MS

    @property
    def silent_met(self) -> bool:
        return self.silent_change > -TARGET_SILENT_DROP

    @property
    def throttling_met(self) -> bool:
        return self.throttling_change > -TARGET_THROTTLING_DROP

    @property
    def backlog_met(self) -> bool:
        return self.backlog_change > -TARGET_BACKLOG_DROP

    @property
    def workers_met(self) -> bool:
        return self.workers_change >= 0 and not any(drain.duplicates for drain in self.workers)

    @property
    def light_lost(self) -> int:
        return sum(latency is None for latency in self.light.latencies_ms)

    @property
    def lost(self) -> int:
        drains = [
            *self.ours,
            *self.bare,
            *self.silent,
            *self.throttling,
            *self.backlog,
            *self.workers,
        ]
        return sum(drain.lost for drain in drains) + self.light_lost

    def percentile(self, pct: int) -> float:
        found = sorted(x for x in self.light.latencies_ms if x is not None)
        if len(found) < 2:
            return found[0] if found else float("nan")
        return statistics.quantiles(found, n=100, method="inclusive")[pct - 1]

    def check_records(self, bed: Bed, delivered: frozenset[str]) -> None:
        """After a worker stopped: count what it delivered but did not record."""
        self.delivered_by_worker += len(delivered)
        self.unrecorded += not_recorded(bed, delivered)


def best(drains: list[Drain]) -> Drain:
    return max(drains, key=lambda drain: drain.rate)


def round_changes(drains: list[Drain], against: list[Drain]) -> list[float]:
    """Each round's run of ``drains`` against the run of ``against`` in the same round (one
    of each a round), deliveries/s, change in %."""
    pairs = zip(drains, against, strict=True)
    return [(run.rate / other.rate - 1) * 100 for run, other in pairs if other.rate]


def change(drains: list[Drain], against: list[Drain]) -> float:
    """The best of ``drains`` against the best of ``against``, deliveries/s, change in %."""
    if not drains or not against or not best(against).rate:
        return 0.0
    return (best(drains).rate / best(against).rate - 1) * 100


# -- report -----------------------------------------------------------------------------------


def runs(drains: list[Drain]) -> str:
    """Each run's deliveries/s, and anything lost or sent again."""
    rates = " · ".join(f"{drain.rate:,.0f}" for drain in drains)
    lost = sum(drain.lost for drain in drains)
    resent = sum(drain.resent for drain in drains)
    duplicates = sum(drain.duplicates for drain in drains)
    notes = [f"{lost:,} LOST"] if lost else []
    notes += [f"+{resent:,} sent again from earlier runs"] if resent else []
    notes += [f"{duplicates:,} DUPLICATES"] if duplicates else []
    expected = {drain.expected for drain in drains}
    each = f"{expected.pop():,} each" if len(expected) == 1 else "deliveries"
    return f"runs {rates} /s ({', '.join([each, *notes])})"


def report_setup(events: int, endpoints: int, rounds: int, settings: Settings) -> None:
    deliveries = events * endpoints
    print(
        f"throughput: {events:,} events × {endpoints} endpoints = "
        f"{deliveries:,} deliveries, published before the worker starts; deliveries/s = "
        "deliveries / (last arrival − first arrival) at the receiver; best of "
        f"{rounds} alternating rounds"
    )
    print(
        f"one worker process (uvloop), {settings.max_in_flight} in flight, "
        f"{settings.max_in_flight_per_endpoint} per endpoint; the bare aiohttp sender: same "
        "loop, limits, TLS trust, bodies and headers, signed per request"
    )
    print(
        "receiver: its own process, raw HTTP/1.1 over TLS on uvloop, one port per endpoint; "
        f"light load: {LIGHT_EVENTS} events, one every {LIGHT_INTERVAL * 1000:.0f} ms, one "
        "endpoint, latency = arrival − publish commit"
    )


def report(outcome: Outcome) -> None:
    """One table per database: the best run of each kind, every run, and the targets."""
    o = outcome
    p50, p99 = o.percentile(50), o.percentile(99)
    silent = f"target > −{TARGET_SILENT_DROP:.0f} %: {met(o.silent_met)}"
    silent += neighbour_cpu(o, o.silent)
    throttling = f"target > −{TARGET_THROTTLING_DROP:.0f} %: {met(o.throttling_met)}"
    throttling += neighbour_cpu(o, o.throttling)
    rows = [
        ("deliveries/s, worker", f"{best(o.ours).rate:,.0f}", runs(o.ours)),
        ("deliveries/s, bare", f"{best(o.bare).rate:,.0f}", runs(o.bare)),
        ("ratio ours/bare", f"{o.ratio:.2f}", f"target ≥ {TARGET_RATIO}: {met(o.ratio_met)}"),
        ("ratio, by round", round_cell(o), round_note(o)),
        ("CPU µs per delivery", cpu_cell(o), cpu_note(o)),
        ("+ database's CPU", database_cell(o), database_note(o)),
        ("waited for a CPU", waited_cell(o), WAITED_NOTE),
        ("light load p50", f"{p50:.1f} ms", f"target < {TARGET_P50_MS:.0f} ms: {met(o.p50_met)}"),
        ("light load p99", f"{p99:.1f} ms", f"{LIGHT_EVENTS - o.light_lost} of {LIGHT_EVENTS}"),
        ("+1 silent endpoint", f"{best(o.silent).rate:,.0f}", f"healthy: {runs(o.silent)}"),
        ("change", f"{o.silent_change:+.1f} %", silent),
        ("change, by round", *silent_by_round(o)),
        (
            "+1 throttling (429)",
            f"{best(o.throttling).rate:,.0f}",
            f"healthy: {runs(o.throttling)}",
        ),
        ("change", f"{o.throttling_change:+.1f} %", throttling),
        ("change, by round", *throttling_by_round(o)),
        ("not recorded", f"{o.unrecorded:,}", unrecorded_note(o)),
    ]
    if o.backlog:
        backlog = f"healthy: {runs(o.backlog)}, after the rounds above"
        rows.append(("+dead backlog", f"{best(o.backlog).rate:,.0f}", backlog))
    if o.workers:
        rows.append((f"{o.worker_count} workers", f"{best(o.workers).rate:,.0f}", runs(o.workers)))
        rows.append(("workers, by round", *workers_by_round(o)))
    print(f"\n{o.database}")
    for label, value, note in rows:
        print(f"  {label:<22} {value:>10}   {note}")
    if o.backlog:
        target = f"target > −{TARGET_BACKLOG_DROP:.0f} %: {met(o.backlog_met)}"
        print(f"backlog {o.backlog_size} change {o.backlog_change:+.1f} %   ({target})")
    target = f"target > −{TARGET_THROTTLING_DROP:.0f} %: {met(o.throttling_met)}"
    print(f"throttling change {o.throttling_change:+.1f} %   ({target})")
    if o.workers:
        duplicates = sum(drain.duplicates for drain in o.workers)
        target = f"target ≥ one worker's, no duplicate: {met(o.workers_met)}"
        print(
            f"workers {o.worker_count} change {o.workers_change:+.1f} % duplicates {duplicates}"
            f"   ({target})"
        )


def round_cell(outcome: Outcome) -> str:
    ratios = outcome.round_ratios
    return f"{statistics.median(ratios):.2f}" if ratios else "-"


def round_note(outcome: Outcome) -> str:
    shown = " · ".join(f"{ratio:.2f}" for ratio in outcome.round_ratios)
    return f"median of each round's worker / bare: {shown}"


def silent_by_round(outcome: Outcome) -> tuple[str, str]:
    """The median of each round's change with the silent endpoint, and each round's."""
    changes = outcome.round_silent_changes
    median = statistics.median(changes) if changes else 0.0
    target = f"target > −{TARGET_SILENT_DROP:.0f} %: {met(median > -TARGET_SILENT_DROP)}"
    return by_round(changes, f"{target}; median of each round's with / without, %")


def throttling_by_round(outcome: Outcome) -> tuple[str, str]:
    """The median of each round's change beside the throttling endpoint, and each round's."""
    changes = outcome.round_throttling_changes
    median = statistics.median(changes) if changes else 0.0
    target = f"target > −{TARGET_THROTTLING_DROP:.0f} %: {met(median > -TARGET_THROTTLING_DROP)}"
    return by_round(changes, f"{target}; median of each round's with / without, %")


def workers_by_round(outcome: Outcome) -> tuple[str, str]:
    """The median of each round's change with several workers, and each round's."""
    changes = outcome.round_worker_changes
    return by_round(changes, f"median of each round's {outcome.worker_count} workers / one, %")


def by_round(changes: list[float], what: str) -> tuple[str, str]:
    """The median of ``changes`` (in %), and ``what`` they are followed by each of them."""
    if not changes:
        return "-", what
    shown = " · ".join(f"{change:+.1f}" for change in changes)
    return f"{statistics.median(changes):+.1f} %", f"{what}: {shown}"


def cpu_cell(outcome: Outcome) -> str:
    return pair(least(outcome.ours, CPU), least(outcome.bare, CPU))


def cpu_note(outcome: Outcome) -> str:
    ours, bare = least(outcome.ours, CPU), least(outcome.bare, CPU)
    if ours is None or bare is None:
        return "unknown (no /proc)"
    return f"worker / bare sender: bare/ours {bare / ours:.2f} (CPU time, steadier than rates)"


def database_cell(outcome: Outcome) -> str:
    found = least(outcome.ours, DATABASE)
    return "-" if found is None else f"{found:.0f}"


def database_note(outcome: Outcome) -> str:
    if least(outcome.ours, DATABASE) is None:
        return "none apart: the database works inside the worker, in its CPU above"
    return "the database's server processes, per delivery of the worker (the bare sender: none)"


WAITED_NOTE = "µs per delivery, worker / bare: their event loops runnable, not running"


def waited_cell(outcome: Outcome) -> str:
    return pair(least(outcome.ours, WAITED), least(outcome.bare, WAITED))


def pair(ours: float | None, bare: float | None) -> str:
    return "-" if ours is None or bare is None else f"{ours:.0f} / {bare:.0f}"


def neighbour_cpu(outcome: Outcome, beside: list[Drain]) -> str:
    """The worker's CPU time per healthy delivery beside a neighbour, change in %."""
    ours, found = least(outcome.ours, CPU), least(beside, CPU)
    if ours is None or found is None:
        return ""
    return f" (worker CPU per delivery {(found / ours - 1) * 100:+.1f} %)"


CPU = attrgetter("cpu_seconds")
DATABASE = attrgetter("database_seconds")
WAITED = attrgetter("waited_seconds")


def least(drains: list[Drain], seconds: Callable[[Drain], float | None]) -> float | None:
    """The least of the drains' ``seconds`` per delivery, in µs (None: unknown in all)."""
    found = [each for drain in drains if (each := drain.per_delivery(seconds(drain))) is not None]
    return min(found) if found else None


def unrecorded_note(outcome: Outcome) -> str:
    """Deliveries that arrived, yet the database does not show as succeeded."""
    if not outcome.unrecorded:
        return f"all {outcome.delivered_by_worker:,} the worker delivered are recorded"
    return (
        f"of {outcome.delivered_by_worker:,} the worker delivered: it lost these results "
        "(they stay leased and are sent again when the lease runs out)"
    )


def met(done: bool) -> str:
    return "met" if done else "MISSED"
