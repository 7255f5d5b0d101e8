"""The secret key that seals secrets at rest: checked before a process seals or opens any,
and changed for all of them at once by ``rekey``.

The database holds one known value sealed with the key (``secret_key_check``). A process
whose key cannot open it is refused, so that it neither claims deliveries it cannot sign nor
writes secrets no other process can open. The first process at this schema stores the value,
after checking that its key opens a secret stored by an older version.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Executable, select, update
from sqlalchemy.orm import Session, sessionmaker

from clubwire import errors
from clubwire.domain import sealing
from clubwire.settings import Settings
from clubwire.storage import database
from clubwire.storage.models import Endpoint, SecretKeyCheck

WRONG_KEY = (
    "CLUBWIRE_SECRET_KEY does not open the webhook signing secrets stored in this database: "
    "set it to the key they were sealed with (docs/operations.md, Rotating the secret key)."
)

_ROW = SecretKeyCheck.id == 1
_READ = select(SecretKeyCheck.sealed).where(_ROW)
# The same value, written back unchanged: the row then stays as read until the transaction
# ends (PostgreSQL's row lock, SQLite's single writer), so a rekey cannot slip in between.
_HOLD = (
    update(SecretKeyCheck)
    .where(_ROW)
    .values(sealed=SecretKeyCheck.sealed)
    .returning(SecretKeyCheck.sealed)
    .execution_options(synchronize_session=False)
)


@dataclass(frozen=True)
class Rekeyed:
    """What ``rekey`` did: how many endpoint secrets it re-sealed, or nothing at all because
    they were already sealed with the new key (a second run)."""

    secrets: int
    already: bool = False


def check(sessions: sessionmaker[Session], settings: Settings) -> None:
    """Refuse (ConfigurationError) a ``CLUBWIRE_SECRET_KEY`` that cannot open the stored
    secrets: for a process starting, one query."""
    with sessions.begin() as session:
        if not _opens_stored(session, _sealer(settings), _READ):
            raise errors.ConfigurationError(WRONG_KEY)


def sealer(session: Session, settings: Settings) -> sealing.Sealer:
    """The sealer of a use-case about to seal a secret: its key checked, and the check held
    until the transaction ends, so that what it seals matches every other stored secret."""
    found = _sealer(settings)
    if not _opens_stored(session, found, _HOLD):
        raise errors.ConfigurationError(WRONG_KEY)
    return found


def rekey(session: Session, old: sealing.Sealer, new: sealing.Sealer) -> Rekeyed:
    """Re-seal every stored secret from ``old`` to ``new`` in the caller's transaction.

    Refuses (InvalidInput, nothing changed) when ``old`` does not open them all; does nothing
    when they are already sealed with ``new``.
    """
    if not _opens_stored(session, old, _HOLD):
        if _opens_stored(session, new, _HOLD):
            return Rekeyed(0, already=True)
        raise errors.InvalidInput(
            "The old key does not open the secrets stored in this database: nothing was changed."
        )
    count = _reseal_endpoints(session, old, new)
    resealed = new.seal(sealing.CHECK_VALUE)
    session.execute(update(SecretKeyCheck).where(_ROW).values(sealed=resealed))
    return Rekeyed(count)


def _sealer(settings: Settings) -> sealing.Sealer:
    return sealing.Sealer(settings.secret_key_value())


def _opens_stored(session: Session, sealer: sealing.Sealer, query: Executable) -> bool:
    """Whether ``sealer`` opens the check value; with none stored yet, stores this key's
    when it opens a stored secret or none is stored (insert-if-absent: of processes starting
    together, the first one's is kept, and the others are judged by it)."""
    stored = session.scalar(query)
    if stored is None:
        if not _opens_a_stored_secret(session, sealer):
            return False
        sealed = sealer.seal(sealing.CHECK_VALUE)
        session.execute(database.insert_if_absent(session, SecretKeyCheck, id=1, sealed=sealed))
        stored = session.scalar(query)
    return stored is not None and sealer.opens(stored)


def _opens_a_stored_secret(session: Session, sealer: sealing.Sealer) -> bool:
    """Whether ``sealer`` opens one of the endpoints' secrets (true when there is none)."""
    sample = session.scalar(select(Endpoint.secret_sealed).limit(1))
    return sample is None or sealer.opens(sample)


def _reseal_endpoints(session: Session, old: sealing.Sealer, new: sealing.Sealer) -> int:
    """Every endpoint's secret, and its headers of its own if it has any, opened with ``old``
    and sealed with ``new``; how many endpoints."""
    rows = session.execute(select(Endpoint.id, Endpoint.secret_sealed, Endpoint.headers_sealed))
    changes = [_resealed_endpoint(old, new, *row) for row in rows]
    if changes:
        session.execute(update(Endpoint), changes)
    return len(changes)


def _resealed_endpoint(
    old: sealing.Sealer, new: sealing.Sealer, endpoint_id: str, secret: str, headers: str | None
) -> dict[str, str | None]:
    """One endpoint's sealed values sealed with ``new``: its secret, its headers if any."""
    of = f"of endpoint {endpoint_id}"
    resealed = {"id": endpoint_id, "headers_sealed": None}
    resealed["secret_sealed"] = _resealed(old, new, secret, f"the signing secret {of}")
    if headers is not None:
        resealed["headers_sealed"] = _resealed(old, new, headers, f"the headers {of}")
    return resealed


def _resealed(old: sealing.Sealer, new: sealing.Sealer, sealed: str, what: str) -> str:
    try:
        return new.seal(old.open(sealed))
    except sealing.SealError:
        raise errors.InvalidInput(
            f"The old key does not open {what}: nothing was changed."
        ) from None
