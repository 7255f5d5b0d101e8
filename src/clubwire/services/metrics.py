"""One process's Prometheus metrics: HTTP requests, delivery attempts, and the due queue
read from the database at scrape time.

Each process (an app, a worker; a test builds many) has a registry of its own. Labels take
a few fixed values only: never a path, a club or an endpoint.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString
from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import timestamps
from clubwire.services import ordered_lines
from clubwire.services.delivery import deliveries

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_LATEST
ATTEMPT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_BUCKET_LABELS = [*map(floatToGoString, ATTEMPT_BUCKETS), "+Inf"]  # each bucket's ``le``


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        # HTTP requests answered, by (route family, status): a plain counter, as the API's
        # hot path adds to it (only the event loop does); read at scrape time.
        self.requests: collections.Counter[tuple[str, int]] = collections.Counter()
        self.registry.register(RequestCounts(self.requests))
        self._attempts = AttemptCounts()
        self.registry.register(self._attempts)

    @contextmanager
    def watching_queue(
        self, sessions: sessionmaker[Session], clock: Callable[[], datetime] = timestamps.utc_now
    ) -> Iterator[None]:
        """Within the block, scrapes also report the due queue, read from the database."""
        collector = DueQueue(sessions, clock)
        self.registry.register(collector)
        try:
            yield
        finally:
            self.registry.unregister(collector)

    def count_attempt(
        self, outcome: str, trigger: str, seconds: float, steered: Iterable[str] = ()
    ) -> None:
        """One attempt: its outcome, trigger and length, and how its answer steered what
        comes next (``delivering.steered``)."""
        self._attempts.add(outcome, trigger, seconds, steered)

    def exposition(self) -> bytes:
        """The text format Prometheus scrapes; blocking (it reads the database)."""
        return generate_latest(self.registry)


class RequestCounts:
    def __init__(self, counts: collections.Counter[tuple[str, int]]) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "clubwire_http_requests",
            "HTTP requests answered, by route family (api, internal, ui, other) and status.",
            labels=("family", "status"),
        )
        for (family, status), count in self._counts.copy().items():
            requests.add_metric((family, str(status)), count)
        yield requests


class AttemptCounts:
    """Delivery attempts by (outcome, trigger) and by how the receiver steered them (reason),
    and a histogram of how long they took, as
    plain numbers: the worker adds to them on every attempt, where prometheus_client's
    ``Counter`` and ``Histogram`` cost 4 µs an attempt (ADR 0008, session 15). Read at
    scrape time; a lock keeps an attempt whole, as a Send test may count from another
    thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: collections.Counter[tuple[str, str]] = collections.Counter()
        self._steered: collections.Counter[str] = collections.Counter()
        self._buckets = [0] * (len(ATTEMPT_BUCKETS) + 1)  # the last: above the largest
        self._seconds = 0.0

    def add(self, outcome: str, trigger: str, seconds: float, steered: Iterable[str]) -> None:
        bucket = bisect.bisect_left(ATTEMPT_BUCKETS, seconds)  # the first bound ≥ seconds
        with self._lock:
            self._counts[outcome, trigger] += 1
            if steered:  # most attempts steer nothing: no call to Counter.update
                self._steered.update(steered)
            self._buckets[bucket] += 1
            self._seconds += seconds

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            counts, steered = self._counts.copy(), self._steered.copy()
            buckets, seconds = list(self._buckets), self._seconds
        attempts = CounterMetricFamily(
            "clubwire_delivery_attempts",
            "Webhook delivery attempts, by outcome (succeeded, retrying, dead, failed) "
            "and trigger (scheduled, manual, test).",
            labels=("outcome", "trigger"),
        )
        for (outcome, trigger), count in counts.items():
            attempts.add_metric((outcome, trigger), count)
        yield attempts
        steers = CounterMetricFamily(
            "clubwire_delivery_attempts_steered",
            "Webhook delivery attempts whose answer steered what comes next, by reason: "
            "retry_after (the next attempt waits as the receiver asked), throttled (no "
            "answer, 429 or 5xx: the endpoint gets fewer attempts at a time), gone (410: "
            "the endpoint is switched off).",
            labels=("reason",),
        )
        for reason, count in steered.items():
            steers.add_metric((reason,), count)
        yield steers
        yield HistogramMetricFamily(
            "clubwire_delivery_attempt_duration_seconds",
            "How long webhook delivery attempts took, from sending to the answer or failure.",
            buckets=list(zip(_BUCKET_LABELS, itertools.accumulate(buckets), strict=True)),
            sum_value=seconds,
        )


class DueQueue:
    """The due queue at scrape time. If the database cannot be read, says so
    (``clubwire_database_up 0``) and leaves the queue out, instead of failing the scrape."""

    def __init__(self, sessions: sessionmaker[Session], clock: Callable[[], datetime]) -> None:
        self._sessions = sessions
        self._clock = clock

    def collect(self) -> Iterator[Metric]:
        now = self._clock()
        try:
            with self._sessions() as session:
                due, oldest = deliveries.due_backlog(session, now)
                held = ordered_lines.held_count(session)
        except Exception as exc:
            log.warning("metrics: cannot read the due queue: %s", type(exc).__name__)
            yield _gauge("clubwire_database_up", "Whether the database could be read.", 0)
            return
        yield _gauge("clubwire_database_up", "Whether the database could be read.", 1)
        yield _gauge(
            "clubwire_deliveries_due",
            "Deliveries whose next attempt is due now or in flight (all clubs).",
            due,
        )
        yield _gauge(
            "clubwire_deliveries_held",
            "Deliveries of ordered endpoints waiting for an earlier one of their key (all clubs).",
            held,
        )
        age = (now - oldest).total_seconds() if oldest is not None else 0.0
        yield _gauge(
            "clubwire_oldest_due_delivery_age_seconds",
            "How long the longest-waiting due delivery has been due; 0 when none is.",
            age,
        )


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)
