"""W3C Trace Context as an event keeps it and a delivery sends it."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from clubwire.domain import trace_context
from clubwire.domain.trace_context import STATE_LIMIT, TraceContext

PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def test_the_headers_carry_the_state_only_when_there_is_one() -> None:
    assert TraceContext(PARENT).headers() == {"traceparent": PARENT}
    assert TraceContext(PARENT, "a=1").headers() == {"traceparent": PARENT, "tracestate": "a=1"}
    assert trace_context.of(None, "a=1") is None
    assert trace_context.of(PARENT, "a=1") == TraceContext(PARENT, "a=1")


def test_a_short_state_is_kept_as_it_is() -> None:
    assert trace_context.kept_state("a=1,b=2") == "a=1,b=2"
    assert trace_context.kept_state("") is None
    assert trace_context.kept_state(None) is None


def test_a_long_state_loses_long_entries_first_then_entries_from_the_end() -> None:
    long_one = "long=" + "x" * 200
    entries = [f"k{number}=" + "v" * 60 for number in range(10)]  # 640 characters with commas
    kept = trace_context.kept_state(",".join([entries[0], long_one, *entries[1:]]))
    assert kept == ",".join(entries[:8])  # 8 × 63 + 7 = 511; a ninth would pass 512


@given(st.lists(st.text(alphabet="abcdefghij=0123456789", min_size=1, max_size=300)))
def test_any_state_is_kept_within_the_limit_by_whole_entries(entries: list[str]) -> None:
    state = ",".join(entries)
    kept = trace_context.kept_state(state)
    if kept is None:
        return
    assert len(kept) <= STATE_LIMIT
    assert set(kept.split(",")) <= {entry.strip() for entry in state.split(",")}
