"""The worker's lane policy (ADR 0008): plain bookkeeping, with no I/O and no clock of its own
(times are the event loop's, passed in), so that it is tested step by step.

Each endpoint the worker has leased has a lane: the jobs claimed for it, waiting in its
queue or held by one of its runners (at most its ``width``), and every job claimed and not
recorded yet. Its width is ``per_endpoint`` while the endpoint copes; each attempt that
strains it (no answer, 429, a 5xx) halves the width, down to one, and each other attempt
widens it by one again; at a width of one, the next attempt after one that strained it waits
``STRAINED_PAUSE``. So a dead, hanging or overloaded endpoint gets one attempt at a time, at
most ten a second, and its failures do not take the worker's time from the other lanes
(issue 31: a dead endpoint refused 400 attempts a second at a width of one).

A lane asks for more while it has room for a refill, so it does not run dry, and for
``turn`` seconds at most while the worker has no room for another lane; then it drains and
is given back, so that the endpoints that waited longest are leased next, by this worker or
another (with room, it begins a new turn, and the worker looks for due work). A lane that
ran dry lingers, drained, for the rest of its turn (half its lease at most), and claims
again when a wake-up names it, with no lease to take; it is given back at once when the
worker has other lanes to lease and no room for them.

A lane holds ``rounds`` of attempts waiting, as many as may wait inside the lease whatever
the endpoint's pace, or, once its pace shows that they take less than ``PACE_SECONDS``, up
to ``deep_rounds``: a fast endpoint's lane is claimed for in fewer, larger claims. The
worker holds at most ``depth`` jobs in all and ``max_lanes`` lanes. A lane with a max rate
holds ``rate_seconds`` of attempts and starts them ``1 / rate`` seconds apart.
"""

from __future__ import annotations

import bisect
import contextlib
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import NamedTuple

from clubwire.domain.delivering import Job, Result
from clubwire.settings import Settings
from clubwire.storage.queue import START, Claimed, LeasedLane, Place, Want

BACKLOG_ROUNDS = 4
DEEP_ROUNDS = 16
PACE_SECONDS = 1.0
PACE_AFTER = 0.1  # seconds of a lane's attempts before its pace counts
LANE_TURN = 5.0
LANES_FIRST = 1  # lanes leased a round until a lease finds as many due as it asked for twice
RATE_SECONDS = 2
STRAINED_PAUSE = 0.1  # seconds a lane narrowed to one waits after each attempt that strains it
RETRIES_KEPT = 64  # the earliest retries a worker remembers, to look when they come due


@dataclass(frozen=True, slots=True)
class Limits:
    per_endpoint: int  # attempts in flight to one endpoint
    rounds: int  # rounds of attempts a lane holds waiting, whatever its endpoint's pace
    depth: int  # jobs the worker holds in all
    max_lanes: int  # lanes the worker holds at once
    deep_rounds: int = 0  # rounds a lane may hold waiting once its pace shows them quick
    lease: timedelta = timedelta(seconds=60)  # how long a lease lasts; renewed at half
    turn: float = LANE_TURN  # seconds a lane asks for more before it is given back
    rate_seconds: int = RATE_SECONDS  # with a max rate, seconds of attempts a lane holds

    @classmethod
    def of(cls, settings: Settings) -> Limits:
        """A lane holds its attempts in flight and up to ``backlog_rounds`` more rounds
        waiting, so each waiting job's attempt still ends inside its lease (up to
        ``DEEP_ROUNDS`` at a quick endpoint); the worker holds as many deep rounds of
        ``max_in_flight``, and so leases as many lanes as it may run at once."""
        return cls(
            per_endpoint=settings.max_in_flight_per_endpoint,
            rounds=backlog_rounds(settings),
            depth=settings.max_in_flight * (DEEP_ROUNDS + 1),
            max_lanes=settings.max_in_flight,
            deep_rounds=DEEP_ROUNDS,
            lease=timedelta(seconds=settings.lease_seconds),
        )

    def lane_depth(self, rounds: int, width: int | None = None) -> int:
        """Jobs a lane of ``rounds`` holds: its attempts in flight (``width``, at most
        ``per_endpoint``) and the rounds waiting."""
        return (width or self.per_endpoint) * (rounds + 1)

    def refill(self, rounds: int, width: int | None = None) -> int:
        """A lane of ``rounds`` asks for more once it has room for half of them (or one)."""
        return max(1, (width or self.per_endpoint) * rounds // 2)


def backlog_rounds(settings: Settings) -> int:
    """Rounds of attempts a claimed job may wait behind at its endpoint: up to
    ``BACKLOG_ROUNDS``, so long as waiting and then its own attempt end inside its lease."""
    rounds = int(settings.lease_seconds // settings.attempt_timeout) - 1
    return max(0, min(BACKLOG_ROUNDS, rounds))


@dataclass(slots=True, eq=False)
class Lane:
    """One leased endpoint: its jobs waiting in ``queue`` or held by one of its ``runners``,
    and the ids of every job claimed and not recorded yet (``claimed``).

    Its claims go on from the ``place`` the last one reached in the endpoint's queue. A
    delivery may come due behind that place (a publish committed late, a Retry) or be left
    there (a job dropped): then the lane starts again from the start of the queue
    (``restart``), past the jobs it holds (``unsure``: those claimed before the restart,
    which may lie beyond any place it reaches from there)."""

    leased: LeasedLane
    since: float  # when it was leased
    lease_until: datetime  # when its lease runs out, unless renewed
    queue: deque[Job] = field(default_factory=deque)
    claimed: set[str] = field(default_factory=set)
    runners: int = 0
    width: int = 1  # attempts it may have in flight
    dry: bool = False  # its last claim found fewer due deliveries than it asked for
    closing: bool = False  # being given back, or its lease lost: it claims nothing more
    next_start: float = 0.0  # when its next attempt may start (a max rate, a pause)
    stale: bool = False  # its endpoint may have changed: renew and read it again
    place: Place = START  # where its claims have reached
    rounds: int = 0  # of attempts it holds waiting (``Limits``)
    started: int = 0  # attempts started since it was leased
    unsure: set[str] = field(default_factory=set)  # held jobs maybe beyond ``place``
    restarts: int = 0  # how many times its claims started again from the start
    turn_began: float = field(init=False)  # when its turn began (``LanePolicy._turn_over``)

    def __post_init__(self) -> None:
        self.turn_began = self.since

    def restart(self) -> None:
        """Claim from the start of the endpoint's queue again, past the jobs held."""
        self.place = START
        self.unsure = set(self.claimed)
        self.restarts += 1

    @property
    def busy(self) -> int:
        return len(self.queue) + self.runners


Wants = dict[str, Want]  # by endpoint
Asked = tuple[int, Collection[str] | None]  # lanes to lease, and of which endpoints (None: any)
# The round's database steps: take and renew leases (now, until, asked, to renew), and
# claim jobs (now, wants); the worker's run where its link puts them, the tests' in memory.
LeaseStep = Callable[[datetime, datetime, Asked, list[str]], Awaitable[list[LeasedLane]]]
ClaimStep = Callable[[datetime, Wants], Awaitable[Claimed]]


class Dealt(NamedTuple):
    """What a claim round did: whether it had anything to do (leases, renewals or a claim),
    the jobs claimed, and the runners to start (one entry per runner, by endpoint)."""

    worked: bool
    jobs: list[Job]
    runners: list[str]


class LanePolicy:
    """The lanes a worker holds and what each does next; the worker (``worker.loop``) calls:

    - ``wake`` when the queue says endpoints may have work due or changed;
    - ``claim_round`` for each claim round (``ClaimRound``), while ``waiting`` says there is
      something to lease or claim; idle, it sleeps as ``room_for_lanes``, ``due_now``,
      ``until_retry`` say;
    - ``next_job``, ``pace``, ``starts``, ``lease_until``, ``attempted``, ``drop`` and
      ``runner_ended`` from each lane's runners;
    - ``done``, ``recorded`` and ``given_back`` around each batch it records, and
      ``until_lingered`` for when to give back a lingering lane;
    - ``stop`` when it stops, and ``claim_failed`` when a round failed.
    """

    def __init__(self, limits: Limits) -> None:
        self.limits = limits
        self.lanes: dict[str, Lane] = {}
        self.stopping = False
        self._wanting: dict[str, None] = {}  # lanes to claim for, in the order they asked
        self._named: set[str] = set()  # endpoints a wake-up named, to lease
        self._discover = True  # lease any lanes with due work in the next round
        self._full_leases = 0  # lease rounds in a row that found all the lanes they asked for
        self._claiming: set[str] = set()  # lanes in the claim under way
        self._restarts: dict[str, int] = {}  # of the lanes claimed for, as the claim began
        self.busy = 0  # jobs waiting or running in all lanes (the sum of their ``busy``)
        self._retries: list[datetime] = []  # the earliest retries it recorded, in order
        # Room a lane may take (at its deepest), and the least a lane asks for.
        self._deepest = limits.lane_depth(max(limits.rounds, limits.deep_rounds))
        self._fresh = limits.lane_depth(limits.rounds)  # room a lane takes when leased
        self._most_doublings = limits.max_lanes.bit_length()  # of ``_to_lease``'s batch
        self._least_refill = limits.refill(limits.rounds)

    # -- wake-ups -----------------------------------------------------------------------------

    def wake(self, endpoint_ids: Collection[str] | None, changed: bool = True) -> None:
        """Endpoints may have deliveries due, or (``changed``) have changed: claim for those
        whose lanes are held, reading their endpoints again if they changed, and lease the
        others. None: any may have; lease what is due, and claim for every held lane,
        reading its endpoint again."""
        if endpoint_ids is None:
            self._discover = True
        named = self.lanes if endpoint_ids is None else endpoint_ids
        for endpoint_id in named:
            held = self.lanes.get(endpoint_id)
            if held is None or held.closing:
                self._named.add(endpoint_id)
            else:
                held.dry, held.stale = False, held.stale or changed
                held.restart()  # what came due may lie behind where its claims reached
                self._wanting.setdefault(endpoint_id)

    @property
    def waiting(self) -> bool:
        """Whether a claim round now would have something to do: lanes asking for more
        while the worker has room, or lanes to lease while it has room for one (asked on
        every attempt's end, so it must not be true while nothing can be done)."""
        room = self._room()
        if self._wanting and room > 0:
            return True
        return bool((self._named or self._discover) and self.room_for_lanes(room))

    def due_now(self) -> bool:
        """Whether to look at once rather than sleep: there is room, and something to lease."""
        return bool(self.room_for_lanes() and (self._discover or self._named))

    # -- a claim round ------------------------------------------------------------------------

    @contextlib.contextmanager
    def claim_round(self, now: float, wall: datetime) -> Iterator[ClaimRound]:
        """A claim round beginning at the event loop's time ``now`` (``wall``: the clock's),
        ended however it ends (no lane counts as being claimed for after)."""
        try:
            yield ClaimRound(self, now, wall)
        finally:
            self._claimed()

    def room_for_lanes(self, room: int | None = None, fresh: bool = False) -> int:
        """How many more lanes the worker may lease (``room``: jobs it may still hold): as
        many as would fill it at their deepest, or (``fresh``) as many as fill it as they
        are when leased, which is what a round may lease (``_to_lease``): most lanes never
        grow deep, and a lane that does claims more only while the worker has room."""
        room = self._room() if room is None else room
        each = self._fresh if fresh else self._deepest
        lanes = min(self.limits.max_lanes - len(self.lanes), max(1, room // each))
        return 0 if room < self._least_refill or self.stopping else max(0, lanes)

    def _to_lease(self) -> Asked:
        """How many lanes to lease, and of which endpoints (None: any with due work): one a
        round at first, so that workers looking at the same moment (all woken by one
        give-back or publish) share a few lanes due rather than the first taking them all;
        once two rounds in a row found all they asked for (so many are due that the others
        find theirs too), twice as many each round, up to the room the worker has for lanes.
        One a round for ever made 2,000 endpoints due at once take 2,000 rounds before every
        lane was sending (issue 38: −61 % on SQLite, −73 % on PostgreSQL against the same
        deliveries over 50 endpoints)."""
        batch = LANES_FIRST << max(0, self._full_leases - 1)
        lanes = min(self.room_for_lanes(fresh=True), batch)
        if not lanes:
            return 0, None
        if self._discover:
            self._discover, self._named = False, set()
            return lanes, None
        named, self._named = self._named, set()
        return (lanes, named) if named else (0, None)

    def _to_renew(self, now: float, wall: datetime) -> list[str]:
        """Of the held lanes that asked for more and may still, those to renew in this round
        (their endpoints read again): stale ones, and those whose lease is half spent at the
        wall-clock time ``wall``. All of them are claimed for (``wants``) and marked as being
        claimed until ``claimed``; the others keep their lease and endpoint as read."""
        asking = [e for e in self._wanting if self._asks(self.lanes[e], now)]
        self._wanting = dict.fromkeys(asking)
        self._claiming.update(asking)
        half = self.limits.lease / 2
        renew = [
            e for e in asking if self.lanes[e].stale or self.lanes[e].lease_until - wall < half
        ]
        for endpoint_id in renew:
            del self._wanting[endpoint_id]  # back in ``held``, unless lost
        return renew

    def _held(
        self,
        leased: list[LeasedLane],
        renewed: list[str],
        asked: Asked,
        now: float,
        until: datetime,
    ) -> None:
        """Lanes leased or renewed until ``until``, as ``asked`` (``_to_lease``); renewed
        lanes not among them were lost (their leases ran out and another worker took them):
        they claim nothing more. If all the lanes asked for came, more may be due: look
        again (of the named endpoints, those left), for more at a time (``_to_lease``)."""
        got = {lane.endpoint_id for lane in leased}
        for endpoint_id in renewed:
            if endpoint_id not in got:
                lost = self.lanes[endpoint_id]
                lost.dry = lost.closing = True
        for fresh in leased:
            lane = self.lanes.get(fresh.endpoint_id)
            if lane is None:
                self.lanes[fresh.endpoint_id] = Lane(
                    fresh, now, until, rounds=self.limits.rounds, width=self.limits.per_endpoint
                )
            else:
                lane.leased, lane.lease_until, lane.stale = fresh, until, False
            self._wanting.setdefault(fresh.endpoint_id)
        count, named = asked
        taken = len(got - set(renewed))
        self._count_lease(asked, taken)
        if count and taken >= count:
            if named is None:
                self._discover = True
            else:
                self._named.update(set(named) - got)

    def _count_lease(self, asked: Asked, taken: int) -> None:
        """Count the rounds in a row whose leases took all they asked for while more may be
        due (any lane, or more of those named: a lane named alone, as each publish of a burst
        names it, says nothing of others), for ``_to_lease``; a round that took fewer starts
        the count again."""
        count, named = asked
        if not count:
            return
        more = taken >= count and (named is None or len(named) > taken)
        self._full_leases = min(self._full_leases + 1, self._most_doublings) if more else 0

    def _wants(self) -> Wants:
        """How many jobs to claim for each lane that wants some, within the worker's depth;
        lanes left without room keep waiting for the next round."""
        room = self._room()
        wants = {}
        for endpoint_id in list(self._wanting):
            lane = self.lanes[endpoint_id]
            lane_room = self._room_in(lane)
            if lane_room < self._refill_of(lane):
                del self._wanting[endpoint_id]  # it asks again when it has room
            elif room > 0:
                count = min(lane_room, room)
                # The held ones as a copy: the claim reads them on another thread.
                held = list(lane.unsure)
                wants[endpoint_id] = Want(lane.leased, count, lane.lease_until, lane.place, held)
                self._restarts[endpoint_id] = lane.restarts
                room -= count
                del self._wanting[endpoint_id]
        self._claiming.update(wants)
        return wants

    def _deal(self, jobs: Iterable[Job], reached: Mapping[str, Place], wants: Wants) -> list[str]:
        """Queue the claimed jobs in their lanes, which go on from where the claim ``reached``
        (unless they restarted meanwhile: then the jobs claimed count as held past anywhere);
        the lanes to start a runner for, one entry per runner (counted as running from now)."""
        got: dict[str, list[str]] = {endpoint_id: [] for endpoint_id in wants}
        for job in jobs:
            lane = self.lanes[job.endpoint_id]
            lane.queue.append(job)
            self.busy += 1
            lane.claimed.add(job.delivery_id)
            got[job.endpoint_id].append(job.delivery_id)
        start = []
        for endpoint_id, want in wants.items():
            lane = self.lanes[endpoint_id]
            if lane.restarts != self._restarts.get(endpoint_id):
                # A wake-up came meanwhile: what it named may not have been read.
                lane.unsure.update(got[endpoint_id])
            else:
                lane.dry = len(got[endpoint_id]) < want.count
                lane.place = reached.get(endpoint_id, lane.place)
            start += [endpoint_id] * self._start(lane)
        return start

    def _claimed(self) -> None:
        """The claim round is over (done or failed)."""
        self._claiming.clear()
        self._restarts.clear()

    def claim_failed(self) -> None:
        self._discover = True

    # -- runners ------------------------------------------------------------------------------

    def next_job(self, endpoint_id: str, now: float) -> Job | None:
        """The lane's next job, if any; the lane asks for more when it has room for a refill."""
        lane = self.lanes[endpoint_id]
        if not lane.queue or lane.runners > lane.width:
            return None
        job = lane.queue.popleft()
        self.busy -= 1
        lane.started += 1
        self._pace(lane, now)
        if self._asks(lane, now) and self._room_in(lane) >= self._refill_of(lane):
            self._wanting.setdefault(endpoint_id)
        return job

    def attempted(self, result: Result, now: float) -> int:
        """An attempt of the lane ended: one that strained its endpoint (``Result.strains``)
        halves the lane's width (a runner over the width ends when it looks for its next
        job), and once that leaves one, pauses the lane (so a quick receiver answering 429
        to every other request does not get hundreds a second at a width swinging between
        one and two); a success widens it by one, up to
        ``per_endpoint``; any other answer (the message's own failure) leaves it. Additive
        increase, multiplicative decrease, as TCP's congestion window (ADR 0015). How many
        runners to start for the lane now (counted as running)."""
        lane = self.lanes[result.job.endpoint_id]
        if result.strains:
            lane.width = max(1, lane.width // 2)
            if lane.width == 1:
                lane.next_start = max(lane.next_start, now + STRAINED_PAUSE)
            return 0
        if result.ok:
            lane.width = min(self.limits.per_endpoint, lane.width + 1)
        return self._start(lane)

    def pace(self, endpoint_id: str, now: float) -> float:
        """Seconds until the lane's next attempt may start: a strained lane's pause, or with
        a max rate, ``1 / rate`` after its last attempt started."""
        return max(0.0, self.lanes[endpoint_id].next_start - now)

    def starts(self, endpoint_id: str, now: float) -> bool:
        """Whether an attempt of the lane may start now (a runner that waited for a place
        among the attempts in flight may find that another one of the lane started
        meanwhile); if it may, with a max rate the next one waits ``1 / rate`` from now. One
        worker holds a lane at a time, so all workers together keep to it (a lane leased
        afresh may start one attempt sooner)."""
        lane = self.lanes[endpoint_id]
        if now < lane.next_start:
            return False
        if (rate := lane.leased.max_rate) is not None:
            lane.next_start = now + 1 / rate
        return True

    def lease_until(self, job: Job) -> datetime:
        """When the lease the job is attempted under runs out: its lane's, renewed since the
        claim (a lane whose jobs all waited for a max rate's pace kept dropping them, held
        under the lease as it stood at their claim)."""
        lane = self.lanes.get(job.endpoint_id)
        return job.lease_until if lane is None else max(job.lease_until, lane.lease_until)

    def drop(self, endpoint_id: str, jobs: Iterable[Job]) -> None:
        """Jobs given back unattempted (their lease ran short, or the worker stops): nothing
        was written, so they are simply claimed again in a later round."""
        lane = self.lanes[endpoint_id]
        jobs = list(jobs)
        for job in jobs:
            lane.claimed.discard(job.delivery_id)
            if job in lane.queue:
                lane.queue.remove(job)
                self.busy -= 1
        if jobs:
            lane.restart()  # they lie behind where its claims reached

    def runner_ended(self, endpoint_id: str, now: float) -> None:
        """A runner found nothing waiting; the lane asks for more if it may (a lane with a
        max rate holds no more jobs than runners, so it never asks while popping one)."""
        lane = self.lanes[endpoint_id]
        lane.runners -= 1
        self.busy -= 1
        if self._asks(lane, now) and self._room_in(lane) >= self._refill_of(lane):
            self._wanting.setdefault(endpoint_id)

    def stop(self) -> None:
        """Claim nothing more; drop the jobs waiting (others take them once the lanes are
        given back)."""
        self.stopping = True
        for endpoint_id, lane in self.lanes.items():
            self.drop(endpoint_id, list(lane.queue))

    # -- recording ----------------------------------------------------------------------------

    def recorded(self, results: Iterable[Result]) -> bool:
        """The results were recorded: their jobs are no longer held. Whether a retry among
        them comes due before those remembered (the worker then looks again when it does:
        ``until_retry``)."""
        retries = self._retries
        earliest = retries[0] if retries else None
        for result in results:
            lane = self.lanes.get(result.job.endpoint_id)
            if lane is not None:
                lane.claimed.discard(result.job.delivery_id)
                lane.unsure.discard(result.job.delivery_id)
            due = result.verdict.next_attempt_at
            if due is not None and (len(retries) < RETRIES_KEPT or due < retries[-1]):
                bisect.insort(retries, due)
                del retries[RETRIES_KEPT:]
        return bool(retries) and retries[0] != earliest

    def until_retry(self, wall: datetime, longest: float) -> float:
        """Seconds a busy worker may pause before it looks for due work again: until the
        earliest retry it recorded comes due (then it looks, and forgets those due),
        ``longest`` at most. Without this, a retry whose lane was given back waited for
        another lane's give-back to be leased again: up to a turn late (issue 31)."""
        due = bisect.bisect_right(self._retries, wall)
        if due:
            del self._retries[:due]
            return 0.0
        if not self._retries:
            return longest
        return min(longest, (self._retries[0] - wall).total_seconds())

    def done(self, now: float) -> list[str]:
        """Lanes with nothing waiting or in flight, and none in the claim under way, that
        claim nothing more and do not linger: marked closing, to be given back once their
        results are recorded (``given_back``). None lingers while other lanes wait to be
        leased and the worker has no room for them, or its leases keep finding all they ask
        for (more lanes are due than it holds: over 2,000 endpoints due, drained lanes that
        lingered filled its ``max_lanes`` and stalled its leases until all were given back)."""
        waited = bool(self._named or self._discover) and not self.room_for_lanes()
        crowded = waited or self._full_leases > 1
        done = [
            endpoint_id
            for endpoint_id, lane in self.lanes.items()
            if not lane.busy
            and endpoint_id not in self._claiming
            and not self._asks(lane, now)
            and (crowded or not self._lingers(lane, now))
        ]
        for endpoint_id in done:
            self.lanes[endpoint_id].closing = True
            self._wanting.pop(endpoint_id, None)
        return sorted(done)

    def until_lingered(self, now: float) -> float | None:
        """Seconds until the first lingering lane is to be given back (None: none lingers)."""
        ends = [self._linger_end(lane) for lane in self.lanes.values() if self._lingers(lane, now)]
        return max(0.0, min(ends) - now) if ends else None

    def given_back(self, endpoint_ids: Iterable[str], ok: bool = True) -> None:
        """The lanes were given back (what is still due there is leased again, in turn), or
        giving them back failed (``ok`` false: they stay, and are tried again)."""
        given = False
        for endpoint_id in endpoint_ids:
            if ok:
                del self.lanes[endpoint_id]
                given = True
            else:
                self.lanes[endpoint_id].closing = False
        if given:
            self._discover = True

    # -- inside -------------------------------------------------------------------------------

    def _asks(self, lane: Lane, now: float) -> bool:
        """Whether the lane may still ask for more."""
        return not (lane.closing or lane.dry or self.stopping or self._turn_over(lane, now))

    def _turn_over(self, lane: Lane, now: float) -> bool:
        """Whether the lane's turn is over: it has asked for more for ``turn`` seconds and
        the worker has no room to lease another lane. While it has room, the lane begins a
        new turn and the worker looks for due work, so that an endpoint waiting is leased
        beside it (a lane given back at the end of each turn made the events published
        meanwhile wait for it to drain and be leased again: issue 31)."""
        if now - lane.turn_began <= self.limits.turn:
            return False
        if not self.room_for_lanes():
            return True
        lane.turn_began, self._discover = now, True
        return False

    def _lingers(self, lane: Lane, now: float) -> bool:
        """Whether the lane, drained after running dry, stays leased a while: the deliveries
        of a burst come due one after another, and a lane given back at each pause is leased
        again only once no publish holds its head (issue 31)."""
        return lane.dry and not lane.closing and not self.stopping and now < self._linger_end(lane)

    def _linger_end(self, lane: Lane) -> float:
        """The end of the lane's turn, inside its lease (a lane that lingers is not renewed)."""
        return lane.since + min(self.limits.turn, self.limits.lease.total_seconds() / 2)

    def _start(self, lane: Lane) -> int:
        """Runners to start for the lane's waiting jobs, up to its width (counted as running)."""
        count = max(0, min(lane.width - lane.runners, len(lane.queue)))
        lane.runners += count
        self.busy += count
        return count

    def _pace(self, lane: Lane, now: float) -> None:
        """The rounds the lane holds: as many as it ends in ``PACE_SECONDS`` at the pace of
        its attempts since it was leased, between ``rounds`` and ``deep_rounds``. So the
        jobs waiting at a quick endpoint still take well under the lease; should the
        endpoint slow down, those whose lease runs short are dropped, and claimed again."""
        elapsed = now - lane.since
        if elapsed >= PACE_AFTER:
            ended = lane.started - lane.runners  # each runner's attempt is under way
            quick = int(ended / elapsed * PACE_SECONDS) // lane.width
            lane.rounds = max(self.limits.rounds, min(self.limits.deep_rounds, quick))

    def _room(self) -> int:
        return self.limits.depth - self.busy

    def _room_in(self, lane: Lane) -> int:
        rate = lane.leased.max_rate
        depth = self.limits.lane_depth(lane.rounds, lane.width)
        if rate is not None:
            depth = min(depth, rate * self.limits.rate_seconds)
        return depth - lane.busy

    def _refill_of(self, lane: Lane) -> int:
        rate = lane.leased.max_rate
        refill = self.limits.refill(lane.rounds, lane.width)
        if rate is None:
            return refill
        return max(1, min(refill, rate * self.limits.rate_seconds // 2))


class ClaimRound:
    """One claim round, which owns its order. Made by ``LanePolicy.claim_round`` with what it
    leases (``asked``: how many lanes, of which endpoints) and renews (``renew``) decided;
    ``run`` has ``lease`` take and renew those, notes the lanes held, has ``claim`` read the
    jobs of the lanes that want some, and queues them in their lanes."""

    def __init__(self, policy: LanePolicy, now: float, wall: datetime) -> None:
        self._policy = policy
        self._wall = wall
        self.asked = policy._to_lease()
        self.renew = policy._to_renew(now, wall)

    async def run(self, lease: LeaseStep, claim: ClaimStep, clock: Callable[[], float]) -> Dealt:
        """Lease and renew, then claim (``clock``: the event loop's time, read after the
        lease)."""
        policy = self._policy
        leased: list[LeasedLane] = []
        if self.asked[0] or self.renew:
            until = self._wall + policy.limits.lease
            leased = await lease(self._wall, until, self.asked, self.renew)
            policy._held(leased, self.renew, self.asked, clock(), until)
        wants = policy._wants()
        if not wants:
            return Dealt(bool(leased), [], [])
        claimed = await claim(self._wall, wants)
        return Dealt(True, claimed.jobs, policy._deal(claimed.jobs, claimed.reached, wants))
