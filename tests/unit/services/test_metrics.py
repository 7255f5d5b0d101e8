"""The attempt metrics as Prometheus reads them: counts by outcome and trigger, and a histogram
whose buckets hold every attempt at or under their bound (prometheus_client's parser judges
the text)."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from clubwire.services.metrics import ATTEMPT_BUCKETS, Metrics

DURATION = "clubwire_delivery_attempt_duration_seconds"


def scraped(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.exposition().decode()
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_attempts_are_counted_by_outcome_and_trigger() -> None:
    metrics = Metrics()
    metrics.count_attempt("succeeded", "scheduled", 0.01)
    metrics.count_attempt("succeeded", "scheduled", 0.02)
    metrics.count_attempt("dead", "manual", 3.0)

    found = scraped(metrics)

    total = "clubwire_delivery_attempts_total"
    assert found[total, (("outcome", "succeeded"), ("trigger", "scheduled"))] == 2
    assert found[total, (("outcome", "dead"), ("trigger", "manual"))] == 1
    assert (total, (("outcome", "retrying"), ("trigger", "scheduled"))) not in found


def test_the_duration_histogram_holds_each_attempt_at_or_under_its_bound() -> None:
    metrics = Metrics()
    for seconds in (0.005, 0.0051, 2.5, 61.0):  # on a bound, just over one, past the last
        metrics.count_attempt("succeeded", "scheduled", seconds)

    found = scraped(metrics)

    def bucket(le: str) -> float:
        return found[f"{DURATION}_bucket", (("le", le),)]

    assert bucket("0.005") == 1
    assert bucket("0.01") == 2
    assert bucket("1.0") == 2
    assert bucket("2.5") == 3
    assert bucket("60.0") == 3
    assert bucket("+Inf") == 4
    assert found[f"{DURATION}_count", ()] == 4
    assert found[f"{DURATION}_sum", ()] == 0.005 + 0.0051 + 2.5 + 61.0
    assert len([key for key in found if key[0] == f"{DURATION}_bucket"]) == len(ATTEMPT_BUCKETS) + 1


def test_before_any_attempt_the_histogram_is_there_empty() -> None:
    found = scraped(Metrics())

    assert found[f"{DURATION}_count", ()] == 0
    assert found[f"{DURATION}_bucket", (("le", "+Inf"),)] == 0


def test_attempts_a_receiver_steered_are_counted_by_reason() -> None:
    metrics = Metrics()
    metrics.count_attempt("retrying", "scheduled", 0.01, ["retry_after", "throttled"])
    metrics.count_attempt("retrying", "scheduled", 0.01, ["throttled"])
    metrics.count_attempt("dead", "scheduled", 0.01, ["gone"])
    metrics.count_attempt("succeeded", "scheduled", 0.01)

    found = scraped(metrics)

    steered = "clubwire_delivery_attempts_steered_total"
    assert found[steered, (("reason", "retry_after"),)] == 1
    assert found[steered, (("reason", "throttled"),)] == 2
    assert found[steered, (("reason", "gone"),)] == 1
