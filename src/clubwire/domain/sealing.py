"""Secrets at rest: sealed (encrypted and authenticated) with a key derived from the secret key."""

from __future__ import annotations

import base64

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

_PURPOSE = b"clubwire: webhook signing secrets at rest"
# Sealed once and stored, so that a process can tell whether its key is the one the stored
# secrets were sealed with before it seals or opens any of them.
CHECK_VALUE = "clubwire: the secret key that sealed this database's secrets"


class SealError(ValueError):
    """A sealed value could not be opened: the secret key is not the one it was sealed with."""


class Sealer:
    """Fernet (AES-128-CBC + HMAC-SHA256) under a key derived from ``CLUBWIRE_SECRET_KEY``."""

    def __init__(self, secret_key: str) -> None:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_PURPOSE)
        key = derived.derive(secret_key.encode())
        self._fernet = Fernet(base64.urlsafe_b64encode(key))

    def seal(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode("ascii")

    def open(self, sealed: str) -> str:
        try:
            return self._fernet.decrypt(sealed.encode("ascii")).decode()
        except (InvalidToken, UnicodeError) as exc:
            raise SealError(
                "A stored secret cannot be decrypted: CLUBWIRE_SECRET_KEY is not the key it was "
                "stored with."
            ) from exc

    def opens(self, sealed: str) -> bool:
        """Whether ``sealed`` was sealed with this key."""
        try:
            self.open(sealed)
        except SealError:
            return False
        return True
