"""One typed settings object, read from ``CLUBWIRE_*`` environment variables (and ``.env``)."""

from __future__ import annotations

import ipaddress
import logging
import os
import secrets
from email import utils as email_utils
from pathlib import Path
from typing import Annotated, Self
from urllib.parse import urlsplit

import pydantic
from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from clubwire import errors, logs
from clubwire.domain import mail_servers

log = logging.getLogger(__name__)

HOME = Path(".clubwire")
SECRET_KEY_FILE = "secret_key"  # noqa: S105 (a file name)
MIN_SECRET_LENGTH = 32
MIN_TOKEN_LENGTH = 16


class Settings(BaseSettings):
    """Everything clubwire reads from its environment; see ``.env.example`` for each key."""

    model_config = SettingsConfigDict(
        env_prefix="CLUBWIRE_",
        env_file=".env",
        env_ignore_empty=True,
        extra="ignore",
        frozen=True,
    )

    home: Path = HOME
    database_url: str = ""
    public_url: str = "http://127.0.0.1:8000"
    club_host_suffix: str | None = None
    max_request_bytes: Annotated[int, Field(ge=1024, le=100 * 1024 * 1024)] = 1024 * 1024
    platform_token: SecretStr | None = None
    # The club data API's rate limits (ADR 0009), requests a minute; 0 turns one off.
    api_rate_limit: Annotated[int, Field(ge=0, le=1_000_000)] = 600  # per key
    api_club_rate_limit: Annotated[int, Field(ge=0, le=1_000_000)] = 1_800  # all a club's keys
    api_auth_failure_limit: Annotated[int, Field(ge=0, le=1_000_000)] = 60  # per address
    # What each API process keeps in memory, the most recently used: key rows (and when each
    # key's use was last written), and clubs' program listings.
    api_kept_keys: Annotated[int, Field(ge=1, le=10_000_000)] = 10_000
    api_kept_listings: Annotated[int, Field(ge=1, le=1_000_000)] = 1_000
    # Proxies whose X-Forwarded-For names the client (addresses or networks, commas between);
    # none by default: the client is the socket's peer.
    trusted_proxies: Annotated[tuple[str, ...], NoDecode] = ()
    secret_key: Annotated[SecretStr | None, Field(min_length=MIN_SECRET_LENGTH)] = None

    # Webhooks (DESIGN §6, §7)
    retry_schedule: Annotated[tuple[int, ...], NoDecode] = (60, 300, 1800, 7200, 43200)
    # How far ahead of its answer a receiver's Retry-After may put the next attempt, seconds
    # (a later ask is cut to it; 0 keeps to the schedule): the schedule's longest step.
    retry_after_max: Annotated[int, Field(ge=0, le=30 * 24 * 3600)] = 43200
    attempt_timeout: Annotated[float, Field(gt=0, le=60)] = 10.0
    connect_timeout: Annotated[float, Field(gt=0, le=60)] = 5.0
    lease_seconds: Annotated[float, Field(gt=0)] = 60.0
    max_in_flight: Annotated[int, Field(ge=1, le=10_000)] = 128
    max_in_flight_per_endpoint: Annotated[int, Field(ge=1, le=1_000)] = 16
    max_endpoints_per_club: Annotated[int, Field(ge=1, le=1_000)] = 20
    allow_private_targets: bool = False
    ca_bundle: Path | None = None
    retention_days: Annotated[int, Field(ge=1)] = 30
    replay_limit: Annotated[int, Field(ge=1, le=1_000_000)] = 10_000  # deliveries per replay

    # Emails to club admins when an endpoint fails (both set, or email is off)
    smtp_url: SecretStr | None = None  # smtp://user:password@host:587, or smtps://
    mail_from: str | None = None  # the From of those emails: clubwire <hooks@example.org>

    # Operations
    log_level: logs.Level = "info"
    metrics_token: SecretStr | None = None
    serve_metrics_port: Annotated[int | None, Field(ge=1, le=65535)] = None
    serve_metrics_host: str = "127.0.0.1"
    worker_metrics_port: Annotated[int | None, Field(ge=1, le=65535)] = None
    worker_metrics_host: str = "127.0.0.1"

    @field_validator("retry_schedule", mode="before")
    @classmethod
    def _seconds_list(cls, value: object) -> object:
        if isinstance(value, str):
            try:
                return tuple(int(part) for part in value.split(",") if part.strip())
            except ValueError:
                raise ValueError("must be whole seconds separated by commas") from None
        return value

    @field_validator("trusted_proxies", mode="before")
    @classmethod
    def _address_list(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for part in value:
            try:
                ipaddress.ip_network(part, strict=False)
            except ValueError:
                raise ValueError(f"{part!r} is not an IP address or network") from None
        return value

    @field_validator("retry_schedule")
    @classmethod
    def _positive_delays(cls, value: tuple[int, ...]) -> tuple[int, ...]:
        if not value or any(delay < 0 for delay in value):
            raise ValueError("must list at least one delay, none negative")
        return value

    @model_validator(mode="after")
    def _lease_outlasts_an_attempt(self) -> Self:
        if self.lease_seconds <= self.attempt_timeout:
            raise ValueError("CLUBWIRE_LEASE_SECONDS must be longer than CLUBWIRE_ATTEMPT_TIMEOUT")
        return self

    @field_validator("platform_token", "metrics_token")
    @classmethod
    def _long_token(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value()) < MIN_TOKEN_LENGTH:
            raise ValueError(f"must be at least {MIN_TOKEN_LENGTH} characters")
        return value

    @field_validator("smtp_url")
    @classmethod
    def _mail_server(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None:
            mail_servers.parse(value.get_secret_value())
        return value

    @field_validator("mail_from")
    @classmethod
    def _sender(cls, value: str | None) -> str | None:
        if value is None:
            return None
        _, address = email_utils.parseaddr(value)
        if not value.isprintable() or "@" not in address:
            raise ValueError("must be an email address, like clubwire <hooks@example.org>")
        return value.strip()

    @model_validator(mode="after")
    def _mail_settings_together(self) -> Self:
        if (self.smtp_url is None) != (self.mail_from is None):
            raise ValueError("CLUBWIRE_SMTP_URL and CLUBWIRE_MAIL_FROM go together: set both")
        return self

    @property
    def mail_server(self) -> mail_servers.MailServer | None:
        """Where emails go out; None when email is off (``CLUBWIRE_SMTP_URL`` unset)."""
        if self.smtp_url is None:
            return None
        return mail_servers.parse(self.smtp_url.get_secret_value())

    @field_validator("log_level", mode="before")
    @classmethod
    def _lower_case_level(cls, value: object) -> object:
        return value.lower() if isinstance(value, str) else value

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str) -> str:
        if value and not value.startswith(("sqlite:", "postgresql:", "postgresql+psycopg:")):
            raise ValueError("must start with sqlite:/// or postgresql://")
        return value

    @field_validator("public_url")
    @classmethod
    def _absolute_http_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an absolute http:// or https:// URL")
        return value.rstrip("/")

    @field_validator("club_host_suffix")
    @classmethod
    def _dotted_suffix(cls, value: str | None) -> str | None:
        if value is not None and (not value.startswith(".") or "/" in value or ":" in value):
            raise ValueError(
                "must be a host name suffix that starts with a dot, like .api.example.com"
            )
        return value.lower() if value else None

    @property
    def sqlalchemy_url(self) -> str:
        """The database URL with the driver SQLAlchemy should use."""
        url = self.database_url or f"sqlite:///{self.home / 'clubwire.db'}"
        if url.startswith("postgresql://"):
            return "postgresql+psycopg://" + url.removeprefix("postgresql://")
        return url

    def club_base_url(self, slug: str) -> str:
        """The club's ``{base_url}`` (DESIGN §5): by host when a suffix is set, else by path."""
        if self.club_host_suffix:
            return f"https://{slug}{self.club_host_suffix}"
        return f"{self.public_url}/clubs/{slug}"

    @property
    def is_sqlite(self) -> bool:
        return self.sqlalchemy_url.startswith("sqlite:")

    def secret_key_value(self) -> str:
        """The encryption key for secrets at rest; ``load_settings`` guarantees there is one."""
        if self.secret_key is None:
            raise errors.ConfigurationError("CLUBWIRE_SECRET_KEY is not set.")
        return self.secret_key.get_secret_value()


def load_settings(**overrides: object) -> Settings:
    """Read the settings from the environment and make sure a secret key exists.

    On the embedded SQLite default a missing ``CLUBWIRE_SECRET_KEY`` is generated once into
    the home folder (with a warning); with PostgreSQL it must be set.
    """
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except pydantic.ValidationError as exc:
        raise errors.ConfigurationError(_describe(exc)) from None
    if settings.secret_key is not None:
        return settings
    if not settings.is_sqlite:
        raise errors.ConfigurationError(
            "CLUBWIRE_SECRET_KEY must be set when the database is PostgreSQL "
            f"(at least {MIN_SECRET_LENGTH} characters)."
        )
    return settings.model_copy(
        update={"secret_key": SecretStr(_embedded_secret_key(settings.home))}
    )


def _embedded_secret_key(home: Path) -> str:
    """The key kept in ``home``, made once; two processes starting together agree on it."""
    path = home / SECRET_KEY_FILE
    if not path.exists():
        _create_key_file(home, path)
    key = path.read_text().strip()
    if len(key) < MIN_SECRET_LENGTH:
        raise errors.ConfigurationError(
            f"{path} holds no usable key (fewer than {MIN_SECRET_LENGTH} characters): "
            "restore it from a backup, or delete it only if nothing was encrypted with it."
        )
    return key


def _create_key_file(home: Path, path: Path) -> None:
    home.mkdir(parents=True, exist_ok=True)
    draft = home / f".{SECRET_KEY_FILE}.{secrets.token_hex(4)}"
    fd = os.open(draft, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    with os.fdopen(fd, "w") as file:
        file.write(secrets.token_urlsafe(32) + "\n")
        file.flush()
        os.fsync(file.fileno())
    try:
        os.link(draft, path)  # atomic, and fails if another process got there first
    except FileExistsError:
        return
    finally:
        draft.unlink()
    log.warning(
        "CLUBWIRE_SECRET_KEY is not set: generated one into %s. "
        "Keep it with the database; set CLUBWIRE_SECRET_KEY in production.",
        path,
    )


def _describe(exc: pydantic.ValidationError) -> str:
    first = exc.errors()[0]
    name = "CLUBWIRE_" + str(first["loc"][0]).upper() if first["loc"] else "settings"
    return f"{name}: {first['msg']}"
