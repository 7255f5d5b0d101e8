"""The tables, as typed SQLAlchemy models. Every table that holds club data has ``club_id``."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    false,
    text,
    true,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from clubwire.domain import ordering
from clubwire.storage.types import UTCDateTime

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# ``info`` of a table or index that exists on one database only (``on_database``).
ONLY_ON = "only_on"


def on_database(item: Any, dialect_name: str) -> bool:
    """Whether a table or index of the models exists on this database."""
    only_on: str = item.info.get(ONLY_ON, dialect_name)
    return only_on == dialect_name


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {datetime: UTCDateTime()}


class Club(Base):
    __tablename__ = "clubs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    slug: Mapped[str] = mapped_column(String(63), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    webhooks_enabled: Mapped[bool] = mapped_column(Boolean, server_default=false())
    # Bumped with every change to the club's programs; API processes cache the
    # program list as bytes and compare this number on every request.
    programs_version: Mapped[int] = mapped_column(Integer, server_default="0")
    # Days an event's payload is kept once its deliveries are done (NULL: as long as the
    # history, ``CLUBWIRE_RETENTION_DAYS``); ``services.personal_data.expiry``.
    payload_days: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class Program(Base):
    __tablename__ = "programs"

    club_id: Mapped[str] = mapped_column(
        ForeignKey("clubs.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    description: Mapped[str] = mapped_column(Text)
    type: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32))
    start_date: Mapped[datetime]
    end_date: Mapped[datetime]
    # Up to 9,999,999,999 cents (program_wire.Price): past what a 32-bit integer holds.
    price_cents: Mapped[int] = mapped_column(BigInteger)
    capacity: Mapped[int] = mapped_column(Integer)
    private: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class ApiKey(Base):
    __tablename__ = "api_keys"
    __table_args__ = (Index("ix_api_keys_club_id_created_at", "club_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    club_id: Mapped[str] = mapped_column(ForeignKey("clubs.id", ondelete="CASCADE"))
    prefix: Mapped[str] = mapped_column(String(12), unique=True)
    secret_hash: Mapped[str] = mapped_column(String(64))
    name: Mapped[str] = mapped_column(String(100))
    scopes: Mapped[str] = mapped_column(String(200))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime | None]  # NULL: never
    # The last use, written at most once a minute: when, from which address, by what client.
    last_used_at: Mapped[datetime | None]
    last_used_ip: Mapped[str | None] = mapped_column(String(64))
    last_used_user_agent: Mapped[str | None] = mapped_column(String(200))
    revoked_at: Mapped[datetime | None]


class Endpoint(Base):
    """A club's webhook receiver URL, its subscriptions and its health."""

    __tablename__ = "endpoints"
    __table_args__ = (Index("ix_endpoints_club_id_created_at", "club_id", "created_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    club_id: Mapped[str] = mapped_column(ForeignKey("clubs.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[str] = mapped_column(String(500))  # space-separated kinds
    secret_sealed: Mapped[str] = mapped_column(String(500))  # encrypted with the secret key
    enabled: Mapped[bool] = mapped_column(Boolean)
    # Why it is off, a code (``domain.off_reasons``): dead_in_a_row, gone, staff, superadmin
    disabled_reason: Mapped[str | None] = mapped_column(String(200))
    disabled_at: Mapped[datetime | None]
    last_delivery_at: Mapped[datetime | None]
    last_response_code: Mapped[int | None] = mapped_column(Integer)
    dead_in_a_row: Mapped[int] = mapped_column(Integer, server_default="0")
    max_rate: Mapped[int | None] = mapped_column(Integer)  # deliveries a second; NULL: no limit
    # Headers of its own sent on every attempt, sealed like its secret; NULL: none.
    headers_sealed: Mapped[str | None] = mapped_column(Text)
    # Whether each resource's events go one at a time, in order (``services.delivery.ordering``).
    ordered: Mapped[bool] = mapped_column(Boolean, server_default=false())
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


_KEPT = text("payload_removed IS NULL")


class Event(Base):
    """A published event: its envelope, serialised once, as the exact bytes every attempt sends."""

    __tablename__ = "events"
    __table_args__ = (
        UniqueConstraint("club_id", "idempotency_key"),
        Index("ix_events_created_at", "created_at"),
        # Each club's events whose payload may yet expire, oldest first (issue 34).
        Index(
            "ix_events_club_id_created_at_kept",
            "club_id",
            "created_at",
            sqlite_where=_KEPT,
            postgresql_where=_KEPT,
        ),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    club_id: Mapped[str] = mapped_column(ForeignKey("clubs.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(64))
    body: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[datetime]
    idempotency_key: Mapped[str | None] = mapped_column(String(255))
    # Why (part of) the body is gone (``domain.personal_data.Removed``): a member's fields
    # erased, or the whole payload expired; NULL: the body is as published.
    payload_removed: Mapped[str | None] = mapped_column(String(16))
    # The resource it is about and its place among that resource's events of the club
    # (``domain.ordering``), as its body says; NULL for a Send test's ping.
    ordering_key: Mapped[str | None] = mapped_column(String(ordering.KEY_LENGTH))
    sequence: Mapped[int | None] = mapped_column(BigInteger)
    # The W3C trace context it was published in (``clubwire.tracing``): every attempt of its
    # deliveries is a span of that trace. NULL: tracing was off.
    traceparent: Mapped[str | None] = mapped_column(String(64))
    tracestate: Mapped[str | None] = mapped_column(String(512))


class EventPerson(Base):
    """A person an event is about, as a digest of one member id or email it carries
    (``domain.personal_data.digest``), never the value: how an erasure finds a member's
    events without reading the club's history (ADR 0016). Deleted with what it points at."""

    __tablename__ = "event_people"
    __table_args__ = (Index("ix_event_people_club_id_digest", "club_id", "digest"),)

    event_id: Mapped[str] = mapped_column(
        ForeignKey("events.id", ondelete="CASCADE"), primary_key=True
    )
    digest: Mapped[str] = mapped_column(String(64), primary_key=True)
    club_id: Mapped[str] = mapped_column(String(32))


class Erasure(Base):
    """One erasure of a member's personal data, as a record without any: when, by whom
    (``platform`` or ``operator``), by what it matched (``email``, ``member_id``, or both),
    and how many rows of each table it changed (JSON)."""

    __tablename__ = "erasures"
    __table_args__ = (Index("ix_erasures_club_id_started_at", "club_id", "started_at"),)

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    club_id: Mapped[str] = mapped_column(ForeignKey("clubs.id", ondelete="CASCADE"))
    requested_by: Mapped[str] = mapped_column(String(16))
    matched_by: Mapped[str] = mapped_column(String(32))
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    counts: Mapped[str] = mapped_column(Text)


class Delivery(Base):
    """One event to one endpoint: pending, succeeded, dead or skipped (DESIGN §6)."""

    __tablename__ = "deliveries"
    __table_args__ = (
        # What the worker claims from on SQLite: each endpoint's due deliveries, oldest
        # first (by id among those of one due time: where a lane's claims go on from).
        # PostgreSQL keeps this order in ``queue_entries`` instead (ADR 0008).
        Index(
            "ix_deliveries_pending",
            "endpoint_id",
            "next_attempt_at",
            "id",
            sqlite_where=text("next_attempt_at IS NOT NULL"),
            info={ONLY_ON: "sqlite"},
        ),
        # Keyset pages of an endpoint's deliveries on (created_at, id): see migration 0012.
        Index("ix_deliveries_endpoint_id_created_at_id", "endpoint_id", "created_at", "id"),
        Index("ix_deliveries_club_id_created_at", "club_id", "created_at"),
        Index("ix_deliveries_event_id", "event_id"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    club_id: Mapped[str] = mapped_column(ForeignKey("clubs.id", ondelete="CASCADE"))
    event_id: Mapped[str] = mapped_column(ForeignKey("events.id", ondelete="CASCADE"))
    endpoint_id: Mapped[str] = mapped_column(ForeignKey("endpoints.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16))
    attempt: Mapped[int] = mapped_column(Integer, server_default="0")
    # Set while an attempt is due (scheduled, or brought forward by Retry); NULL when finished.
    next_attempt_at: Mapped[datetime | None]
    next_trigger: Mapped[str] = mapped_column(String(16), server_default="scheduled")
    # Whether next_attempt_at is when the receiver asked (Retry-After), not the schedule's step.
    next_attempt_asked: Mapped[bool] = mapped_column(Boolean, server_default=false())
    response_code: Mapped[int | None] = mapped_column(Integer)
    # Why a skipped delivery was skipped (``delivering.SkipReason``); NULL otherwise.
    skipped_reason: Mapped[str | None] = mapped_column(String(16))
    # Its event's ordering key while it goes in order (its endpoint ordered when it was
    # queued); NULL: it goes as soon as it is due. And the sequence of an earlier delivery of
    # the key that died or was erased before it went, which it tells its receiver.
    ordering_key: Mapped[str | None] = mapped_column(String(ordering.KEY_LENGTH))
    missed_sequence: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]

    # Read only where asked for (services.delivery.deliveries loads the kind with the delivery).
    event: Mapped[Event] = relationship(lazy="raise", viewonly=True)


class QueueEntry(Base):
    """On PostgreSQL, the deliveries with an attempt due and when (ADR 0008):
    the pending index, as a table that triggers keep from ``deliveries.next_attempt_at`` in
    the statement that changes it. In an index of the deliveries themselves, every recorded
    attempt would write a new entry into each of their indexes (an update that changes an
    indexed column is never HOT); this way it deletes or moves one narrow row. SQLite keeps
    the partial index ``ix_deliveries_pending``: it rewrites only the indexes whose columns
    change."""

    __tablename__ = "queue_entries"
    __table_args__ = (
        Index(
            "ix_queue_entries_endpoint_id_due_at_delivery_id",
            "endpoint_id",
            "due_at",
            "delivery_id",
        ),
        {"info": {ONLY_ON: "postgresql"}},
    )

    delivery_id: Mapped[str] = mapped_column(
        ForeignKey("deliveries.id", ondelete="CASCADE"), primary_key=True
    )
    endpoint_id: Mapped[str] = mapped_column(String(32))
    due_at: Mapped[datetime]


class QueueHead(Base):
    """The head of one endpoint's delivery queue (ADR 0008): when its next delivery is due,
    and which worker's lease holds its lane. ``next_due_at`` is the earliest
    ``next_attempt_at`` of the endpoint's unfinished deliveries (NULL: none), kept in the
    transaction that changes them; a worker that leases the lane keeps it until it gives the
    lane back. Finding due work reads these rows only, however many deliveries wait."""

    __tablename__ = "queue_heads"
    __table_args__ = (
        Index(
            "ix_queue_heads_next_due_at",
            "next_due_at",
            sqlite_where=text("next_due_at IS NOT NULL"),
            postgresql_where=text("next_due_at IS NOT NULL"),
        ),
    )

    endpoint_id: Mapped[str] = mapped_column(
        ForeignKey("endpoints.id", ondelete="CASCADE"), primary_key=True
    )
    next_due_at: Mapped[datetime | None]
    lease_until: Mapped[datetime | None]
    lease_token: Mapped[str | None] = mapped_column(String(32))


class OrderedLine(Base):
    """Each delivery that goes in order and has an attempt to come, in its line: its
    endpoint's deliveries of one ordering key, by sequence. Only the first of a line is due;
    the others wait with no ``next_attempt_at`` (held) until the one before them has
    succeeded or died (``services.delivery.ordering``). A table of its own, so that the
    deliveries keep no index on a column an attempt changes (see ``QueueEntry``)."""

    __tablename__ = "ordered_lines"
    __table_args__ = (
        Index(
            "ix_ordered_lines_endpoint_id_ordering_key_sequence",
            "endpoint_id",
            "ordering_key",
            "sequence",
        ),
    )

    delivery_id: Mapped[str] = mapped_column(
        ForeignKey("deliveries.id", ondelete="CASCADE"), primary_key=True
    )
    endpoint_id: Mapped[str] = mapped_column(String(32))
    ordering_key: Mapped[str] = mapped_column(String(ordering.KEY_LENGTH))
    sequence: Mapped[int] = mapped_column(BigInteger)


class OrderingCounter(Base):
    """The last sequence given to an ordering key of a club: each publish of the key takes
    the next, in its own transaction (so none is skipped or given twice). Never pruned: a
    sequence is never given again."""

    __tablename__ = "ordering_counters"

    club_id: Mapped[str] = mapped_column(
        ForeignKey("clubs.id", ondelete="CASCADE"), primary_key=True
    )
    ordering_key: Mapped[str] = mapped_column(String(ordering.KEY_LENGTH), primary_key=True)
    last: Mapped[int] = mapped_column(BigInteger)


class Attempt(Base):
    """One HTTP attempt of a delivery, as it happened."""

    __tablename__ = "attempts"
    # Not unique: after a lost lease two workers may both make "attempt 3" (at least once).
    __table_args__ = (
        Index("ix_attempts_delivery_id_number", "delivery_id", "number"),
        Index("ix_attempts_started_at", "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    delivery_id: Mapped[str] = mapped_column(ForeignKey("deliveries.id", ondelete="CASCADE"))
    number: Mapped[int] = mapped_column(Integer)
    trigger: Mapped[str] = mapped_column(String(16))  # scheduled, manual or test
    started_at: Mapped[datetime]
    duration_ms: Mapped[int] = mapped_column(Integer)
    response_code: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(String(200))
    excerpt: Mapped[str] = mapped_column(Text)
    retry_after: Mapped[str | None] = mapped_column(String(100))  # the receiver's, as given


class User(Base):
    """A member of staff who signs in to the settings area: a superadmin or a club admin."""

    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    email: Mapped[str] = mapped_column(String(254), unique=True)  # stored lower-cased
    password_hash: Mapped[str] = mapped_column(String(200))  # argon2id
    is_superadmin: Mapped[bool] = mapped_column(Boolean)
    created_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class ClubAdmin(Base):
    """Which clubs a user administers."""

    __tablename__ = "club_admins"

    user_id: Mapped[str] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    club_id: Mapped[str] = mapped_column(
        ForeignKey("clubs.id", ondelete="CASCADE"), primary_key=True
    )
    # Whether this admin gets the club's emails about failing endpoints (each admin chooses).
    failure_emails: Mapped[bool] = mapped_column(Boolean, server_default=true())


class WebSession(Base):
    """A signed-in browser. Only a hash of the cookie's token is stored."""

    __tablename__ = "web_sessions"
    __table_args__ = (Index("ix_web_sessions_expires_at", "expires_at"),)

    token_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[str] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]


class Flash(Base):
    """A message for the next page a signed-in browser loads, shown once
    (``services.staff.flashes``): words our code composed, and a secret to show once, only ever
    sealed."""

    __tablename__ = "flashes"
    __table_args__ = (
        Index("ix_flashes_session_hash", "session_hash"),
        Index("ix_flashes_created_at", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_hash: Mapped[str] = mapped_column(
        ForeignKey("web_sessions.token_hash", ondelete="CASCADE")
    )
    created_at: Mapped[datetime]
    kind: Mapped[str] = mapped_column(String(40))
    subject: Mapped[str] = mapped_column(String(64))  # what it is about (an endpoint id), or ""
    words: Mapped[str] = mapped_column(String(2500))
    secret_sealed: Mapped[str | None] = mapped_column(String(500))  # encrypted with the secret key


class Confirmation(Base):
    """A confirmation page of the settings area acted on, by the web session that showed
    it (``services.staff.confirmations``): a second submission of it does nothing."""

    __tablename__ = "confirmations"

    session_hash: Mapped[str] = mapped_column(
        ForeignKey("web_sessions.token_hash", ondelete="CASCADE"), primary_key=True
    )
    token: Mapped[str] = mapped_column(String(32), primary_key=True)
    acted_at: Mapped[datetime]


class SignInFailure(Base):
    """Failed sign-ins per account and per address, to slow down password guessing."""

    __tablename__ = "sign_in_failures"

    key: Mapped[str] = mapped_column(String(300), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer)
    window_start: Mapped[datetime]


class RateCount(Base):
    """Requests to the club data API in one window of a minute, counted by every API process
    together (ADR 0009): per key (``key:<prefix>``) and per client address (``address:<ip>``)."""

    __tablename__ = "rate_counts"

    bucket: Mapped[str] = mapped_column(String(80), primary_key=True)
    window_number: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    count: Mapped[int] = mapped_column(Integer)


class ApiChanges(Base):
    """One row: a number that moves, by triggers in the transaction of the change, whenever
    what processes keep in memory changes (keys, clubs' switches and versions, endpoints'
    subscriptions; migration 0022, ADR 0010)."""

    __tablename__ = "api_changes"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    version: Mapped[int] = mapped_column(BigInteger)


class SecretKeyCheck(Base):
    """One row: a known value sealed with the secret key (``sealing.CHECK_VALUE``), so that a
    process can tell at start whether its ``CLUBWIRE_SECRET_KEY`` opens the stored secrets."""

    __tablename__ = "secret_key_check"
    __table_args__ = (CheckConstraint("id = 1", name="one_row"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    sealed: Mapped[str] = mapped_column(String(500))


class OutboxEmail(Base):
    """An email waiting to go out, written in the transaction of the change it tells of and
    sent by a worker: due while ``next_attempt_at`` is set and past. A worker that takes
    one moves ``next_attempt_at`` a lease ahead and marks it with its ``lease_token``: if it
    dies while sending, the email comes due again when the lease runs out."""

    __tablename__ = "email_outbox"
    __table_args__ = (
        Index(
            "ix_email_outbox_due",
            "next_attempt_at",
            sqlite_where=text("next_attempt_at IS NOT NULL"),
            postgresql_where=text("next_attempt_at IS NOT NULL"),
        ),
        Index("ix_email_outbox_club_id_created_at", "club_id", "created_at"),
    )

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    club_id: Mapped[str] = mapped_column(ForeignKey("clubs.id", ondelete="CASCADE"))
    recipient: Mapped[str] = mapped_column(String(254))
    subject: Mapped[str] = mapped_column(String(200))
    body: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    next_attempt_at: Mapped[datetime | None]  # NULL: sent, or given up (``last_error``)
    lease_token: Mapped[str | None] = mapped_column(String(32))
    sent_at: Mapped[datetime | None]
    last_error: Mapped[str | None] = mapped_column(String(200))
