"""The worker's lane policy, step by step against the queue in memory: limits, turns,
refills, give-backs, wake-ups, max rates and stopping (ADR 0008)."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from functools import partial
from typing import Any, TypeVar

import pytest

from clubwire.domain.delivering import Job, Result, Status, Trigger, Verdict
from clubwire.storage.queue import START, Claimed, LeasedLane
from clubwire.worker import lanes
from clubwire.worker.lanes import Asked, ClaimRound, LanePolicy, Limits, Wants
from tests.factories import EPOCH
from tests.memory_queue import MemoryQueue, Waiting

TOKEN = "wkr_me"
LEASE = timedelta(seconds=60)
LIMITS = Limits(per_endpoint=2, rounds=2, depth=12, max_lanes=4, turn=5.0)
T = TypeVar("T")


def finish(coroutine: Coroutine[Any, Any, T]) -> T:
    """The result of a coroutine that never waits (its steps run in memory)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value  # type: ignore[no-any-return]
    coroutine.close()
    raise AssertionError("the coroutine waited")


class Simulation:
    """A worker's rounds as ``worker.loop`` runs them, with attempts that succeed at once."""

    def __init__(self, limits: Limits = LIMITS, rates: dict[str, int] | None = None) -> None:
        self.queue = MemoryQueue(rates)
        self.policy = LanePolicy(limits)
        self.clock = 0.0  # the event loop's time
        self.runners: list[str] = []  # one entry per runner, by endpoint
        self.results: list[Result] = []
        self.sent: list[str] = []  # delivery ids, in the order attempted
        self.renewed: list[str] = []  # lanes renewed, one entry a renewal
        self.asked: list[Wants] = []  # each claim's wants
        self.failing: set[str] = set()  # endpoints that answer 503

    def publish(self, endpoint_id: str, count: int) -> None:
        for _ in range(count):
            self.queue.add(endpoint_id, f"dlv_{len(self.queue.deliveries):04d}", self.now)

    @property
    def now(self) -> datetime:
        return EPOCH + timedelta(seconds=self.clock)

    def claim(self, meanwhile: Callable[[], None] = lambda: None) -> dict[str, int]:
        """One claim round, as the worker runs it (``meanwhile`` runs while its jobs are
        read); the jobs claimed, by endpoint."""
        with self.round() as claim_round:
            dealt = finish(claim_round.run(self._lease, partial(self._claim, meanwhile), self.time))
        self.runners += dealt.runners
        return Counter(job.endpoint_id for job in dealt.jobs)

    def time(self) -> float:
        return self.clock

    def round(self) -> AbstractContextManager[ClaimRound]:
        """A claim round begun now, to look at what it leases and renews."""
        return self.policy.claim_round(self.clock, self.now)

    async def _lease(
        self, now: datetime, until: datetime, asked: Asked, renew: list[str]
    ) -> list[LeasedLane]:
        self.renewed += renew
        count, named = asked
        kept = self.queue.renew(None, renew, TOKEN, until)  # type: ignore[arg-type]
        taken = self.queue.take(None, now, until, TOKEN, count, named) if count else []  # type: ignore[arg-type]
        return self.queue.lanes(None, [*taken, *kept])  # type: ignore[arg-type]

    async def _claim(self, meanwhile: Callable[[], None], now: datetime, wants: Wants) -> Claimed:
        self.asked.append(wants)
        claimed = self.queue.jobs(None, now, wants, TOKEN)  # type: ignore[arg-type]
        meanwhile()
        return claimed

    def attempt(self) -> None:
        """Each runner attempts one job, or ends."""
        for endpoint_id in list(self.runners):
            job = self.policy.next_job(endpoint_id, self.clock)
            if job is None:
                self.policy.runner_ended(endpoint_id, self.clock)
                self.runners.remove(endpoint_id)
                continue
            result = _failed_now(job) if endpoint_id in self.failing else _succeeded(job)
            self.results.append(result)
            self.sent.append(job.delivery_id)
            started = self.policy.attempted(result, self.clock)
            self.runners += [endpoint_id] * started

    def flush(self) -> list[str]:
        """Record the results and give back the lanes that are done; those lanes."""
        done = self.policy.done(self.clock)
        self.queue.record(None, self.results, EPOCH)  # type: ignore[arg-type]
        self.policy.recorded(self.results)
        self.results = []
        self.queue.give_back(None, done, TOKEN, self.now)  # type: ignore[arg-type]
        self.policy.given_back(done)
        return done

    def step(self, seconds: float = 0.1) -> None:
        self.claim()
        self.attempt()
        self.flush()
        self.clock += seconds
        # Kept as it goes, so that an attempt's end costs the same however many lanes are held.
        assert self.policy.busy == sum(lane.busy for lane in self.policy.lanes.values())

    def in_flight(self, endpoint_id: str) -> int:
        return self.policy.lanes[endpoint_id].runners if endpoint_id in self.policy.lanes else 0


def test_a_lane_runs_its_limit_at_once_and_the_worker_holds_its_depth() -> None:
    world = Simulation()
    for endpoint in ("we_a", "we_b", "we_c"):
        world.publish(endpoint, 50)
    assert world.claim() == {"we_a": 6}  # one lane leased a round
    assert world.claim() == {"we_b": 4}  # the rest of the worker's depth of 12
    assert [world.in_flight(e) for e in ("we_a", "we_b")] == [2, 2]
    assert world.claim() == {}  # no room: we_c waits


def test_a_job_waiting_counts_under_its_lanes_lease_as_renewed() -> None:
    """Checked against the lease as it stood at their claim, a max rate's jobs waiting for
    their pace were dropped one after another, each renewal too late for them."""
    world = Simulation()
    world.publish("we_a", 50)
    world.claim()
    lane = world.policy.lanes["we_a"]
    waiting = lane.queue[-1]
    assert world.policy.lease_until(waiting) == waiting.lease_until
    world.attempt()
    world.attempt()  # room for a refill: it asks
    world.clock += 40  # past half its lease
    world.claim()
    assert world.renewed == ["we_a"]
    assert waiting in lane.queue
    assert world.policy.lease_until(waiting) == lane.lease_until > waiting.lease_until


def test_a_lane_asks_for_more_once_it_has_room_for_a_refill() -> None:
    world = Simulation()
    world.publish("we_a", 50)
    assert world.claim() == {"we_a": 6}
    assert world.claim() == {}  # full: it asks for nothing
    world.attempt()  # two attempts: four waiting, two runners
    assert world.claim() == {}
    world.attempt()  # two more: two waiting, two runners: room for a refill of two
    assert world.claim() == {"we_a": 2}
    # four attempted (not recorded yet), four not
    assert len(world.policy.lanes["we_a"].claimed) == 8


def test_jobs_claimed_and_not_recorded_are_never_claimed_twice() -> None:
    world = Simulation()
    world.publish("we_a", 30)
    for _ in range(40):
        world.step()
    assert len(world.sent) == len(set(world.sent)) == 30


def test_endpoints_with_due_work_take_turns() -> None:
    """Room for two lanes, four busy endpoints: each lane is given back after its turn, and
    the endpoints that waited longest are leased next."""
    world = Simulation(Limits(per_endpoint=2, rounds=2, depth=12, max_lanes=2))
    for endpoint in ("we_a", "we_b", "we_c", "we_d"):
        world.publish(endpoint, 500)
        world.clock += 0.001  # a waits longest, then b, c, d
    served: list[set[str]] = []
    for _ in range(3):  # three turns of 5 s
        seen = set()
        for _ in range(55):
            world.step()
            seen |= set(world.policy.lanes)
            assert len(world.policy.lanes) <= 2
        served.append(seen)
    assert served[0] >= {"we_a", "we_b"}
    assert {"we_c", "we_d"} <= served[1] | served[2]


def test_a_lane_keeps_its_endpoint_past_its_turn_while_the_worker_has_room() -> None:
    """Given back at each turn's end, a busy lane made a burst's events wait for it to drain
    and be leased again; while the worker may lease another lane it begins a new turn, and
    the worker looks for due work, so an endpoint that comes due is leased beside it."""
    world = Simulation(Limits(per_endpoint=2, rounds=2, depth=40, max_lanes=4, turn=5.0))
    world.publish("we_a", 1000)
    world.step()
    lane = world.policy.lanes["we_a"]
    for _ in range(60):  # six seconds: past its turn
        world.step()
    assert world.policy.lanes["we_a"] is lane  # never given back
    assert len(world.sent) > 100  # it went on claiming
    world.publish("we_b", 10)  # no wake-up names it: the next turn's look finds it
    for _ in range(50):
        world.step()
    assert "we_b" in world.policy.lanes or world.queue.heads["we_b"].next_due_at is None
    assert world.policy.lanes["we_a"] is lane


def test_a_lane_that_ran_dry_lingers_drained_until_its_turn_ends() -> None:
    world = Simulation()
    world.publish("we_a", 3)
    assert world.claim() == {"we_a": 3}  # asked for 6: it ran dry
    assert world.flush() == []  # jobs still waiting
    for _ in range(3):
        world.attempt()  # the runners end
    assert world.flush() == []  # drained and recorded: it lingers
    assert world.queue.heads["we_a"].token == TOKEN
    world.clock += 2.0
    assert world.policy.until_lingered(world.clock) == pytest.approx(3.0)  # its turn is 5 s
    world.clock += 3.0
    assert world.flush() == ["we_a"]
    assert world.policy.until_lingered(world.clock) is None
    assert world.queue.heads["we_a"].lease_until is None
    assert world.queue.heads["we_a"].next_due_at is None  # all three succeeded


def test_a_lingering_lane_claims_again_when_named_without_a_new_lease() -> None:
    """A burst's deliveries come due one after another: the lane claims each as its publish
    names it, rather than being given back and leased again (issue 31)."""
    world = Simulation()
    world.publish("we_a", 1)
    for _ in range(3):
        world.step()
    assert world.sent == ["dlv_0000"]
    assert "we_a" in world.policy.lanes  # drained, lingering
    world.publish("we_a", 1)
    world.policy.wake(["we_a"], changed=False)
    with world.round() as claim_round:
        assert claim_round.asked == (0, None)
    world.step()
    assert world.sent == ["dlv_0000", "dlv_0001"]
    assert world.renewed == []  # nor renewed: renewing waits for the publishes' heads


def test_a_lingering_lane_is_given_back_at_once_when_the_worker_needs_its_room() -> None:
    world = Simulation(Limits(per_endpoint=2, rounds=2, depth=12, max_lanes=2))
    for endpoint in ("we_a", "we_b"):
        world.publish(endpoint, 1)
        world.policy.wake([endpoint])
        world.step()
        world.step()
    assert set(world.policy.lanes) == {"we_a", "we_b"}  # both drained, lingering
    world.publish("we_c", 1)
    world.policy.wake(["we_c"])
    world.step()
    world.step()
    world.step()
    assert "we_c" in world.policy.lanes
    assert world.sent == ["dlv_0000", "dlv_0001", "dlv_0002"]


# Room for many lanes: 100 fresh lanes of 6 jobs.
WIDE = Limits(per_endpoint=2, rounds=2, depth=600, max_lanes=64, turn=5.0)


def wide_world(endpoints: int) -> Simulation:
    """A worker with room for many lanes, and ``endpoints`` endpoints with one due each."""
    world = Simulation(WIDE)
    for n in range(endpoints):
        world.publish(f"we_{n:03d}", 1)
    return world


def test_a_worker_leases_twice_as_many_lanes_a_round_while_it_finds_all_it_asked_for() -> None:
    """One a round for two rounds, then doubling up to its room: 2,000 endpoints due at once
    took 2,000 rounds one a round (issue 38)."""
    world = wide_world(100)
    held = []
    for _ in range(8):
        world.claim()
        held.append(len(world.policy.lanes))
    assert held == [1, 2, 4, 8, 16, 32, 64, 64]  # max_lanes


def test_a_lease_that_finds_fewer_than_it_asked_for_starts_again_from_one() -> None:
    world = wide_world(3)
    held = []
    for _ in range(3):
        world.claim()
        held.append(len(world.policy.lanes))
    assert held == [1, 2, 3]  # the third asked for two
    for n in range(3, 13):
        world.publish(f"we_{n:03d}", 1)
    world.policy.wake(None)
    world.claim()
    assert len(world.policy.lanes) == 4


def test_workers_woken_together_over_many_endpoints_share_them() -> None:
    """Each grows its leases at the same pace, so neither takes the lanes from the other."""
    first, second = wide_world(100), Simulation(WIDE)
    second.queue = first.queue
    for _ in range(6):
        first.claim()
        second.claim()
    assert len(first.policy.lanes) == len(second.policy.lanes) == 32
    assert first.policy.lanes.keys().isdisjoint(second.policy.lanes)


def test_drained_lanes_do_not_linger_while_more_lanes_are_due_than_leased() -> None:
    """Over 2,000 endpoints due, lanes that lingered filled ``max_lanes`` and the worker
    leased nothing until all of them were given back."""
    world = wide_world(100)
    for _ in range(3):
        world.claim()  # 1, 1, 2: each found all it asked for
    world.attempt()
    world.attempt()  # the runners end
    assert world.flush() == ["we_000", "we_001", "we_002", "we_003"]  # all ran dry
    assert world.policy.lanes == {}
    assert len(world.sent) == 4


def test_lanes_named_one_at_a_time_still_linger() -> None:
    """Each publish of a burst names its lanes: taking each as it is named says nothing of
    other lanes due, so drained lanes linger as before (issue 31)."""
    world = Simulation(WIDE)
    for endpoint in ("we_a", "we_b", "we_c", "we_d"):
        world.publish(endpoint, 1)
        world.policy.wake([endpoint])
        world.step()
        world.step()
    assert set(world.policy.lanes) == {"we_a", "we_b", "we_c", "we_d"}  # drained, lingering


def test_a_wake_during_a_claim_keeps_the_lane_from_running_dry() -> None:
    """The claim may have read the queue before the publish that woke it committed: the
    lane claims again rather than lingering with a delivery due."""
    world = Simulation()
    world.publish("we_a", 1)
    world.step()
    world.attempt()  # the runner ends: the lane ran dry and lingers
    world.policy.wake(["we_a"], changed=False)  # a publish names it; its claim begins

    def publish() -> None:  # another publish, seen only by the next claim
        world.publish("we_a", 1)
        world.policy.wake(["we_a"], changed=False)

    assert world.claim(meanwhile=publish) == {}
    assert not world.policy.lanes["we_a"].dry
    assert world.claim() == {"we_a": 1}


def test_a_lane_in_a_claim_under_way_is_not_given_back() -> None:
    world = Simulation()
    world.publish("we_a", 1)
    world.step()  # sent and recorded; its runner is still there
    world.attempt()  # the runner ends: the lane ran dry and is idle
    world.policy.wake(["we_a"])  # a publish named it again
    with world.round() as claim_round:
        assert claim_round.renew == ["we_a"]  # a claim is under way
        assert world.policy.done(world.clock) == []


def test_a_wake_naming_a_held_lane_claims_for_it_and_others_are_leased() -> None:
    world = Simulation()
    world.publish("we_a", 6)
    world.claim()  # we_a leased; it took all it asked for, so it is not dry
    assert world.claim() == {}  # nothing else is due
    world.policy.lanes["we_a"].dry = True
    world.publish("we_b", 1)
    world.policy.wake(["we_a", "we_b"])
    with world.round() as claim_round:
        assert claim_round.asked == (1, {"we_b"})
        assert claim_round.renew == ["we_a"]  # named: read it again


def test_a_max_rate_bounds_the_lane_and_spaces_its_attempts() -> None:
    world = Simulation(Limits(per_endpoint=8, rounds=2, depth=48, max_lanes=4), {"we_slow": 2})
    world.publish("we_slow", 20)
    assert world.claim() == {"we_slow": 4}  # two seconds of attempts at 2 a second
    assert world.policy.pace("we_slow", 10.0) == 0.0
    assert world.policy.starts("we_slow", 10.0)
    assert world.policy.pace("we_slow", 10.1) == pytest.approx(0.4)
    assert not world.policy.starts("we_slow", 10.1)  # one runner started; the next waits
    world.attempt()  # four runners, each with one job: none waiting
    world.attempt()  # the runners end, and the lane asks for more
    assert world.claim() == {"we_slow": 4}


def test_a_max_rates_spacing_counts_from_when_attempts_really_start() -> None:
    """A runner that was due at 10.5 s but found every place in flight taken starts at
    10.9 s: the next one waits until 11.4 s, not 11.0 s (six starts of a lane at 5 a second
    once came 0.88 s apart on a busy machine)."""
    world = Simulation(Limits(per_endpoint=8, rounds=2, depth=48, max_lanes=4), {"we_slow": 2})
    world.publish("we_slow", 4)
    world.claim()
    assert world.policy.starts("we_slow", 10.0)
    assert world.policy.pace("we_slow", 10.2) == pytest.approx(0.3)
    assert world.policy.starts("we_slow", 10.9)  # it waited for a place, then started
    assert world.policy.pace("we_slow", 11.0) == pytest.approx(0.4)
    assert not world.policy.starts("we_slow", 11.0)
    assert world.policy.starts("we_slow", 11.4)


def test_a_job_given_back_unattempted_is_in_its_lanes_next_claim() -> None:
    """It lies behind where the lane's claims reached: the lane starts again from the start."""
    world = Simulation()
    world.publish("we_a", 20)
    world.claim()
    lane = world.policy.lanes["we_a"]
    first = lane.queue[0]
    world.policy.drop("we_a", [first])  # its lease ran short while it waited
    assert first.delivery_id not in lane.claimed
    world.attempt()
    world.attempt()  # room for a refill
    assert world.claim() == {"we_a": 3}
    assert first.delivery_id in lane.claimed


def test_a_lost_lease_claims_nothing_more() -> None:
    world = Simulation(Limits(per_endpoint=2, rounds=2, depth=12, max_lanes=4, turn=999))
    world.publish("we_a", 20)
    world.claim()
    world.clock += 61  # the worker stalled: its lease ran out, and another took the lane
    world.queue.heads["we_a"].token = "wkr_other"
    world.queue.heads["we_a"].lease_until = world.now + LEASE
    world.attempt()
    world.attempt()  # room for a refill: its lease is more than half spent, so it renews
    assert world.claim() == {}
    assert world.policy.lanes["we_a"].dry
    world.policy.wake(["we_a"], changed=False)  # a publish names it: lease it afresh
    with world.round() as claim_round:
        assert claim_round.asked == (1, {"we_a"})
        assert claim_round.renew == []


def test_stopping_drops_the_waiting_jobs_and_gives_every_lane_back() -> None:
    world = Simulation()
    world.publish("we_a", 20)
    world.publish("we_b", 20)
    world.claim()
    world.claim()
    world.policy.stop()
    assert [lane.claimed for lane in world.policy.lanes.values()] == [set(), set()]
    with world.round() as claim_round:
        assert claim_round.asked == (0, None)
    world.attempt()  # the runners find nothing waiting and end
    assert world.flush() == ["we_a", "we_b"]
    assert world.policy.lanes == {}
    assert {head.lease_until for head in world.queue.heads.values()} == {None}


def test_a_lease_is_renewed_when_half_spent_or_when_its_endpoint_changed() -> None:
    """Claiming more for a held lane reads nothing but its jobs while its lease is fresh,
    however many publishes name it (renewing waits for the publishes holding its head)."""
    world = Simulation(Limits(per_endpoint=2, rounds=2, depth=12, max_lanes=4, turn=999))
    world.publish("we_a", 400)
    world.claim()
    for _ in range(20):  # two seconds of refills
        world.step()
    assert world.renewed == []
    world.policy.wake(["we_a"], changed=False)  # a publish: more due, nothing changed
    world.step()
    assert world.renewed == []
    world.policy.wake(["we_a"])  # its endpoint changed (a new secret, say)
    world.step()
    assert world.renewed == ["we_a"]
    world.clock += 31  # half the 60 s lease, and more
    for _ in range(3):
        world.step()
    assert world.renewed == ["we_a", "we_a"]
    assert world.queue.heads["we_a"].lease_until == world.now - timedelta(seconds=0.3) + LEASE


def test_a_lane_claims_on_from_where_its_last_claim_ended_past_nothing_it_holds() -> None:
    world = Simulation()
    world.publish("we_a", 30)
    world.claim()
    world.attempt()
    world.attempt()  # four attempted (held until recorded), two waiting: room for a refill
    world.claim()
    first, second = world.asked[0]["we_a"], world.asked[1]["we_a"]
    assert (first.after, list(first.held)) == (START, [])
    sixth = world.queue.deliveries["dlv_0005"]
    assert (second.after, list(second.held)) == ((sixth.due, "dlv_0005"), [])
    assert len(world.policy.lanes["we_a"].claimed) == 8


def test_a_delivery_due_behind_where_the_lane_reached_is_claimed_once_a_wake_names_it() -> None:
    """A publish that commits after a claim, with a due time before the place that claim
    reached (its transaction began earlier), is not claimed until its wake-up arrives; then
    the lane starts again from the start of the queue, past the jobs it holds."""
    world = Simulation(Limits(per_endpoint=2, rounds=2, depth=12, max_lanes=4, turn=999))
    world.clock = 10.0
    world.publish("we_a", 20)
    world.claim()
    late = world.now - timedelta(seconds=5)
    world.queue.deliveries["dlv_late"] = Waiting("we_a", late)  # committed, not yet told
    for _ in range(3):
        world.attempt()
        world.claim()
    assert "dlv_late" not in world.policy.lanes["we_a"].claimed
    world.policy.wake(["we_a"])  # its NOTIFY
    assert world.policy.lanes["we_a"].place == START
    for _ in range(30):
        world.step()
    assert sorted(world.sent) == sorted(world.queue.deliveries)
    assert len(world.sent) == len(set(world.sent)) == 21


def test_jobs_claimed_while_the_lane_started_again_are_held_past_anywhere() -> None:
    """A wake-up during a claim: what that claim read (from the old place) may lie beyond any
    place the lane reaches from the start, so the lane holds those jobs past every claim."""
    world = Simulation()
    world.publish("we_a", 30)
    world.claim(meanwhile=lambda: world.policy.wake(["we_a"]))
    lane = world.policy.lanes["we_a"]
    assert lane.place == START
    assert lane.unsure == lane.claimed
    assert len(lane.claimed) == 6
    for _ in range(40):
        world.step()
    assert len(world.sent) == len(set(world.sent)) == 30


@pytest.mark.parametrize("seed", range(20))
def test_no_job_is_claimed_twice_and_none_left_whatever_comes_between_claims(seed: int) -> None:
    """Publishes (some committing behind where a lane reached, told later), jobs dropped,
    wake-ups of all kinds, during claims or between: every delivery is sent once."""
    rng = random.Random(seed)
    world = Simulation()
    told: list[str] = []
    for _ in range(200):
        endpoint_id = rng.choice(["we_a", "we_b", "we_c"])
        roll = rng.random()
        if roll < 0.15:
            world.publish(endpoint_id, rng.randint(1, 5))
            world.policy.wake([endpoint_id])  # its NOTIFY
        elif roll < 0.25:
            late = world.now - timedelta(seconds=rng.random())
            world.queue.deliveries[f"dlv_late_{len(world.queue.deliveries)}"] = Waiting(
                endpoint_id, late
            )
            world.queue.mark_due(None, [endpoint_id], late)  # type: ignore[arg-type]
            told.append(endpoint_id)
        elif roll < 0.35 and told:
            world.policy.wake([told.pop()])
        elif roll < 0.4:
            world.policy.wake(None)
        elif roll < 0.5:
            _drop_one(world, rng)
        elif roll < 0.6:
            named = rng.choice([None, [endpoint_id]])
            world.claim(meanwhile=partial(world.policy.wake, named))
        world.step(rng.choice([0.05, 0.5, 3.0]))
        assert len(world.sent) == len(set(world.sent))
    for endpoint_id in told:
        world.policy.wake([endpoint_id])
    for _ in range(100):
        world.policy.wake(None)  # an idle worker looks when the earliest lane is due
        world.step(1.0)
    assert sorted(world.sent) == sorted(world.queue.deliveries)


def _drop_one(world: Simulation, rng: random.Random) -> None:
    """A job waiting in a lane given back unattempted (its lease ran short)."""
    waiting = [lane for lane in world.policy.lanes.values() if lane.queue]
    if waiting:
        lane = rng.choice(waiting)
        world.policy.drop(lane.leased.endpoint_id, [rng.choice(list(lane.queue))])


def test_a_quick_endpoints_lane_holds_more_rounds_and_a_slow_ones_does_not() -> None:
    """A lane holds as many rounds as its endpoint ends in a second, between the rounds that
    fit in any lease and ``deep_rounds``: fewer, larger claims where attempts are quick."""
    limits = Limits(per_endpoint=2, rounds=2, depth=40, max_lanes=4, deep_rounds=6, turn=999)
    quick, slow = Simulation(limits), Simulation(limits)
    for world, seconds in ((quick, 0.01), (slow, 1.0)):
        world.publish("we_a", 500)
        for _ in range(30):
            world.step(seconds)
    assert quick.policy.lanes["we_a"].rounds == 6  # 200 attempts a second: capped
    shallow = limits.lane_depth(limits.rounds)
    assert max(want["we_a"].count for want in quick.asked if "we_a" in want) > shallow
    assert slow.policy.lanes["we_a"].rounds == 2  # two a second: one round, below the floor
    assert max(want["we_a"].count for want in slow.asked if "we_a" in want) == shallow


def test_workers_looking_at_once_share_the_lanes_due() -> None:
    """All woken by one give-back, each worker leases one lane a round, so that the first
    does not take every lane while the others find none (two workers, one queue)."""
    first, second = Simulation(), Simulation()
    second.queue = first.queue
    for endpoint in ("we_a", "we_b", "we_c", "we_d"):
        first.publish(endpoint, 10)
    for world in (first, second, first, second):
        world.policy.wake(["we_a", "we_b", "we_c", "we_d"])  # the give-back's NOTIFY
        world.claim()
    assert len(first.policy.lanes) == len(second.policy.lanes) == 2
    assert first.policy.lanes.keys().isdisjoint(second.policy.lanes)


def _succeeded(job: Job) -> Result:
    verdict = Verdict(Status.SUCCEEDED, None, counts_as_success=True)
    return Result(job, EPOCH, True, 200, None, 1, "", verdict)


def _failed_now(job: Job) -> Result:
    """A 503, retried in an hour (long after any simulation ends)."""
    return Result(job, EPOCH, False, 503, None, 1, "", Verdict(Status.PENDING, EPOCH + LEASE * 60))


def _failed(delivery_id: str, retry_in: float) -> Result:
    """A failed attempt whose delivery is retried ``retry_in`` seconds after EPOCH."""
    job = Job(delivery_id, "org_a", "we_a", "ping", "https://x", "", b"{}",
              Status.PENDING, 0, Trigger.SCHEDULED, EPOCH + LEASE)  # fmt: skip
    verdict = Verdict(Status.PENDING, EPOCH + timedelta(seconds=retry_in))
    return Result(job, EPOCH, False, 503, None, 1, "", verdict)


def test_a_busy_worker_looks_again_when_a_retry_it_recorded_comes_due() -> None:
    """Holding lanes, it would otherwise pause a whole turn, and a retry whose lane was given
    back would wait for another lane's give-back to be leased (issue 31: retries 0.75–1.7 s
    late)."""
    policy = LanePolicy(LIMITS)
    assert policy.until_retry(EPOCH, 5.0) == 5.0
    policy.recorded([_failed("dlv_1", 3.0), _failed("dlv_2", 1.0), _failed("dlv_3", 2.0)])
    assert policy.until_retry(EPOCH, 5.0) == 1.0
    later = EPOCH + timedelta(seconds=1.5)
    assert policy.until_retry(later, 5.0) == 0.0  # one came due: look now, and forget it
    assert policy.until_retry(later, 5.0) == 0.5
    assert policy.until_retry(EPOCH + timedelta(seconds=9), 5.0) == 0.0
    assert policy.until_retry(EPOCH + timedelta(seconds=9), 5.0) == 5.0
    policy.recorded([_failed(f"dlv_{n}", 300.0 - n) for n in range(200)])
    assert policy.until_retry(EPOCH, 500.0) == 101.0  # the earliest are the ones kept


def test_a_strained_endpoint_gets_one_attempt_at_a_time_until_it_copes_again() -> None:
    """Each attempt answered 503 halves the lane's width, down to one; each success widens
    it by one: a dead or overloaded endpoint does not take the worker's time (issue 31)."""
    limits = Limits(per_endpoint=8, rounds=2, depth=200, max_lanes=4, turn=999)
    world = Simulation(limits)
    world.failing.add("we_a")
    world.publish("we_a", 100)
    world.publish("we_b", 100)
    world.claim()
    world.claim()
    assert world.in_flight("we_a") == world.in_flight("we_b") == 8
    for _ in range(3):
        world.step()
    assert world.in_flight("we_a") == 1
    assert world.in_flight("we_b") == 8  # the other lane keeps its width
    sent = len(world.sent)
    world.step()
    assert len(world.sent) - sent == 1 + 8
    world.failing.clear()  # it copes again: one more in flight after each success
    widths = []
    for _ in range(4):
        world.step()
        widths.append(world.in_flight("we_a"))
    assert widths == sorted(widths)
    assert widths[-1] > 2


@pytest.mark.parametrize(
    ("ok", "code", "strains"),
    [(False, None, True), (False, 429, True), (False, 503, True), (False, 500, True),
     (False, 400, False), (False, 410, False), (False, 301, False), (True, 200, False)],
)  # fmt: skip
def test_only_no_answer_429_and_5xx_strain_an_endpoint(
    ok: bool, code: int | None, strains: bool
) -> None:
    job = Job("dlv_1", "org_a", "we_a", "ping", "https://x", "", b"{}",
              Status.PENDING, 0, Trigger.SCHEDULED, EPOCH + LEASE)  # fmt: skip
    result = Result(job, EPOCH, ok, code, None, 1, "", Verdict(Status.PENDING, None))
    assert result.strains is strains


def test_a_lane_narrowed_to_one_pauses_after_each_attempt_that_strains_it() -> None:
    """A dead endpoint refuses at once: one attempt at a time is still hundreds a second. So
    is a quick one answering 429 to every other request, whose width would swing between
    one and two with no pause (issue 33: 125 attempts a second at the bench's receiver)."""
    world = Simulation(Limits(per_endpoint=2, rounds=2, depth=12, max_lanes=4, turn=999))
    world.failing.add("we_a")
    world.publish("we_a", 20)
    world.claim()
    assert world.policy.pace("we_a", world.clock) == 0.0
    world.attempt()  # one fails at a width of two: now one, and the lane pauses
    assert world.policy.pace("we_a", world.clock) == pytest.approx(lanes.STRAINED_PAUSE)
    world.policy.attempted(_succeeded(_job("we_a")), world.clock + 1)
    assert world.policy.pace("we_a", world.clock + 1) == 0.0  # no pause after a success
    assert world.policy.lanes["we_a"].width == 2
    world.policy.attempted(_failed_now(_job("we_a")), world.clock + 2)  # two, then one
    assert world.policy.pace("we_a", world.clock + 2) == pytest.approx(lanes.STRAINED_PAUSE)


@pytest.mark.parametrize(("code", "width"), [(429, 2), (504, 2), (200, 5), (404, 4), (301, 4)])
def test_a_lane_narrows_on_a_strain_widens_on_a_success_and_keeps_its_width_else(
    code: int, width: int
) -> None:
    """Additive increase, multiplicative decrease (ADR 0015): a 404 or a redirect is the
    message's own failure, and says nothing about how much the endpoint can take."""
    world = Simulation(Limits(per_endpoint=8, rounds=2, depth=48, max_lanes=4, turn=999))
    world.publish("we_a", 8)
    world.claim()
    world.policy.lanes["we_a"].width = 4
    ok = 200 <= code < 300
    verdict = Verdict(Status.SUCCEEDED if ok else Status.PENDING, None)
    world.policy.attempted(Result(_job("we_a"), EPOCH, ok, code, None, 1, "", verdict), 0.0)
    assert world.policy.lanes["we_a"].width == width


def _job(endpoint_id: str) -> Job:
    return Job("dlv_1", "org_a", endpoint_id, "ping", "https://x", "", b"{}",
               Status.PENDING, 0, Trigger.SCHEDULED, EPOCH + LEASE)  # fmt: skip


def test_a_timed_look_claims_for_every_held_lane_without_renewing_it() -> None:
    """Only a wake-up that says endpoints may have changed reads a fresh lane's endpoint
    again: renewing waits for the publishes holding its head."""
    world = Simulation()
    world.publish("we_a", 1)
    world.step()
    world.step()  # drained: it lingers
    world.publish("we_a", 1)
    world.policy.wake(None, changed=False)
    world.step()
    assert world.sent == ["dlv_0000", "dlv_0001"]
    assert world.renewed == []
    world.policy.wake(None)  # listening anew: anything may have changed
    with world.round() as claim_round:
        assert claim_round.renew == ["we_a"]
