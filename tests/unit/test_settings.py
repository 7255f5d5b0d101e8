"""Unit tests for the settings object and for making sure a secret key exists."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
from pydantic import ValidationError

from clubwire import errors
from clubwire.settings import (
    MIN_SECRET_LENGTH,
    MIN_TOKEN_LENGTH,
    SECRET_KEY_FILE,
    Settings,
    load_settings,
)

pytestmark = pytest.mark.usefixtures("isolated_environment")

SECRET = "a-secret-key-for-the-unit-tests-0123456789"
TOKEN = "a-platform-token-0123456789"


@pytest.fixture
def home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    path = tmp_path / "home"
    monkeypatch.setenv("CLUBWIRE_HOME", str(path))
    return path


# --- Settings -----------------------------------------------------------------------------


def test_defaults_use_sqlite_under_home_and_a_local_public_url() -> None:
    settings = Settings(_env_file=None)
    assert settings.home == Path(".clubwire")
    assert settings.database_url == ""
    assert settings.sqlalchemy_url == f"sqlite:///{Path('.clubwire') / 'clubwire.db'}"
    assert settings.is_sqlite
    assert settings.public_url == "http://127.0.0.1:8000"
    assert settings.club_host_suffix is None
    assert settings.secret_key is None
    assert settings.platform_token is None


def test_the_default_database_follows_home(tmp_path: Path) -> None:
    settings = Settings(_env_file=None, home=tmp_path)
    assert settings.sqlalchemy_url == f"sqlite:///{tmp_path / 'clubwire.db'}"


def test_settings_are_read_from_clubwire_environment_variables(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("CLUBWIRE_PUBLIC_URL", "https://clubwire.example.com")
    monkeypatch.setenv("CLUBWIRE_HOME", str(tmp_path))
    settings = Settings(_env_file=None)
    assert settings.public_url == "https://clubwire.example.com"
    assert settings.home == tmp_path


def test_settings_are_read_from_a_dotenv_file_in_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("CLUBWIRE_PUBLIC_URL=https://from-dotenv.example.com\n")
    assert Settings().public_url == "https://from-dotenv.example.com"


def test_postgresql_urls_get_the_psycopg_driver() -> None:
    settings = Settings(_env_file=None, database_url="postgresql://clubwire@db:5432/clubwire")
    assert settings.sqlalchemy_url == "postgresql+psycopg://clubwire@db:5432/clubwire"
    assert not settings.is_sqlite


def test_postgresql_urls_that_name_the_driver_are_kept() -> None:
    url = "postgresql+psycopg://clubwire@db/clubwire"
    assert Settings(_env_file=None, database_url=url).sqlalchemy_url == url


def test_an_explicit_sqlite_url_is_kept(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'other.db'}"
    settings = Settings(_env_file=None, database_url=url)
    assert settings.sqlalchemy_url == url
    assert settings.is_sqlite


@pytest.mark.parametrize(
    "url", ["mysql://u@h/db", "postgres://u@h/db", "db.sqlite", "http://db", " sqlite:///x.db"]
)
def test_unknown_databases_are_rejected(url: str) -> None:
    with pytest.raises(ValidationError, match="database_url"):
        Settings(_env_file=None, database_url=url)


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("https://clubwire.example.com/", "https://clubwire.example.com"),
        ("https://clubwire.example.com//", "https://clubwire.example.com"),
        ("https://example.com/clubwire/", "https://example.com/clubwire"),
        ("http://localhost:8000", "http://localhost:8000"),
    ],
)
def test_public_url_loses_its_trailing_slash(given: str, kept: str) -> None:
    assert Settings(_env_file=None, public_url=given).public_url == kept


@pytest.mark.parametrize(
    "url",
    [
        "",
        "example.com",
        "/clubwire",
        "ftp://example.com",
        "http://",
        "https:///path",
        "http://[::1",
    ],
)
def test_invalid_public_urls_are_rejected(url: str) -> None:
    with pytest.raises(ValidationError, match="public_url"):
        Settings(_env_file=None, public_url=url)


@pytest.mark.parametrize(
    "suffix", ["", "api.example.com", ".api.example.com/", ".api.example.com:8443", "https://x.io"]
)
def test_invalid_club_host_suffixes_are_rejected(suffix: str) -> None:
    with pytest.raises(ValidationError, match="club_host_suffix"):
        Settings(_env_file=None, club_host_suffix=suffix)


def test_club_host_suffix_is_lower_cased() -> None:
    settings = Settings(_env_file=None, club_host_suffix=".API.Example.com")
    assert settings.club_host_suffix == ".api.example.com"


def test_club_base_url_is_path_based_without_a_host_suffix() -> None:
    settings = Settings(_env_file=None, public_url="https://clubwire.example.com/")
    assert settings.club_base_url("granite") == "https://clubwire.example.com/clubs/granite"


def test_club_base_url_is_host_based_with_a_host_suffix() -> None:
    settings = Settings(
        _env_file=None,
        public_url="https://clubwire.example.com",
        club_host_suffix=".api.example.com",
    )
    assert settings.club_base_url("granite") == "https://granite.api.example.com"


def test_short_secret_keys_and_platform_tokens_are_rejected() -> None:
    with pytest.raises(ValidationError, match="secret_key"):
        Settings(_env_file=None, secret_key="x" * (MIN_SECRET_LENGTH - 1))
    with pytest.raises(ValidationError, match="platform_token"):
        Settings(_env_file=None, platform_token="x" * 15)


@pytest.mark.parametrize("token", ["", "x", "x" * (MIN_TOKEN_LENGTH - 1)])
def test_a_metrics_token_shorter_than_16_characters_is_a_settings_error(
    monkeypatch: pytest.MonkeyPatch, token: str
) -> None:
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", SECRET)
    monkeypatch.setenv("CLUBWIRE_METRICS_TOKEN", token)
    if not token:  # an empty variable is unset (env_ignore_empty)
        assert load_settings().metrics_token is None
        return
    with pytest.raises(errors.ConfigurationError) as raised:
        load_settings()
    assert raised.value.detail == (
        "CLUBWIRE_METRICS_TOKEN: Value error, must be at least 16 characters"
    )


def test_metrics_settings_are_read_and_the_token_kept_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    token = "m" * MIN_TOKEN_LENGTH
    monkeypatch.setenv("CLUBWIRE_METRICS_TOKEN", token)
    monkeypatch.setenv("CLUBWIRE_SERVE_METRICS_PORT", "9100")
    monkeypatch.setenv("CLUBWIRE_SERVE_METRICS_HOST", "10.0.0.5")
    settings = Settings(_env_file=None)
    assert settings.metrics_token is not None
    assert settings.metrics_token.get_secret_value() == token
    assert (settings.serve_metrics_port, settings.serve_metrics_host) == (9100, "10.0.0.5")
    assert token not in repr(settings)
    assert token not in str(settings)


def test_metrics_are_off_the_public_port_by_default() -> None:
    settings = Settings(_env_file=None)
    assert settings.metrics_token is None
    assert (settings.serve_metrics_port, settings.serve_metrics_host) == (None, "127.0.0.1")


@pytest.mark.parametrize("port", ["0", "65536", "http"])
def test_a_serve_metrics_port_out_of_range_is_rejected(
    monkeypatch: pytest.MonkeyPatch, port: str
) -> None:
    monkeypatch.setenv("CLUBWIRE_SERVE_METRICS_PORT", port)
    with pytest.raises(ValidationError, match="serve_metrics_port"):
        Settings(_env_file=None)


def test_secret_key_value_without_a_key_is_a_configuration_error() -> None:
    with pytest.raises(errors.ConfigurationError, match="CLUBWIRE_SECRET_KEY"):
        Settings(_env_file=None).secret_key_value()


def test_secrets_never_appear_in_repr_or_str() -> None:
    settings = Settings(_env_file=None, secret_key=SECRET, platform_token=TOKEN)
    assert settings.secret_key_value() == SECRET
    for text in (repr(settings), str(settings)):
        assert SECRET not in text
        assert TOKEN not in text


def test_settings_are_frozen() -> None:
    settings = Settings(_env_file=None)
    with pytest.raises(ValidationError):
        settings.public_url = "https://elsewhere.example.com"  # type: ignore[misc]


# --- load_settings --------------------------------------------------------------------------


def test_load_settings_generates_a_secret_key_on_sqlite(home: Path) -> None:
    settings = load_settings()
    key = settings.secret_key_value()
    assert len(key) >= MIN_SECRET_LENGTH
    assert (home / SECRET_KEY_FILE).read_text().strip() == key


def test_the_generated_secret_key_file_is_private_to_its_owner(home: Path) -> None:
    load_settings()
    mode = stat.S_IMODE((home / SECRET_KEY_FILE).stat().st_mode)
    assert mode == 0o600


def test_load_settings_returns_the_same_generated_key_next_time(home: Path) -> None:
    first = load_settings().secret_key_value()
    second = load_settings().secret_key_value()
    assert first == second


def test_generating_the_secret_key_warns_once(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="clubwire.settings")
    load_settings()
    load_settings()
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "CLUBWIRE_SECRET_KEY" in warnings[0].getMessage()
    assert str(home / SECRET_KEY_FILE) in warnings[0].getMessage()


def test_the_generated_key_is_never_logged(home: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    key = load_settings().secret_key_value()
    assert key not in caplog.text


def test_an_explicit_secret_key_is_used_and_nothing_is_written(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", SECRET)
    assert load_settings().secret_key_value() == SECRET
    assert not (home / SECRET_KEY_FILE).exists()


def test_load_settings_passes_overrides_through(home: Path) -> None:
    settings = load_settings(public_url="https://clubwire.example.com/", secret_key=SECRET)
    assert settings.public_url == "https://clubwire.example.com"
    assert settings.secret_key_value() == SECRET


def test_postgresql_without_a_secret_key_is_a_configuration_error(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLUBWIRE_DATABASE_URL", "postgresql://clubwire@db/clubwire")
    with pytest.raises(errors.ConfigurationError, match="CLUBWIRE_SECRET_KEY"):
        load_settings()
    assert not (home / SECRET_KEY_FILE).exists()


def test_postgresql_with_a_secret_key_loads(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CLUBWIRE_DATABASE_URL", "postgresql://clubwire@db/clubwire")
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", SECRET)
    assert load_settings().secret_key_value() == SECRET


def test_a_too_short_secret_key_is_a_configuration_error_naming_it(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    short = "short-secret-key"
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", short)
    with pytest.raises(errors.ConfigurationError, match="CLUBWIRE_SECRET_KEY") as caught:
        load_settings()
    assert short not in str(caught.value)
    assert not (home / SECRET_KEY_FILE).exists()


def test_an_invalid_setting_is_a_configuration_error_naming_its_variable(home: Path) -> None:
    with pytest.raises(errors.ConfigurationError, match="CLUBWIRE_PUBLIC_URL"):
        load_settings(public_url="example.com")


@pytest.mark.parametrize("content", ["", "\n", "too-short\n"])
def test_a_truncated_secret_key_file_is_a_configuration_error(home: Path, content: str) -> None:
    """A key file left empty or short (say by a crash mid-write) must not become the key."""
    home.mkdir()
    (home / SECRET_KEY_FILE).write_text(content)
    with pytest.raises(errors.ConfigurationError, match="secret_key"):
        load_settings()


def test_trusted_proxies_are_addresses_or_networks_from_one_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings(_env_file=None).trusted_proxies == ()
    monkeypatch.setenv("CLUBWIRE_TRUSTED_PROXIES", " 10.0.0.0/8, 192.0.2.10 ,,2001:db8::/32")
    assert Settings(_env_file=None).trusted_proxies == ("10.0.0.0/8", "192.0.2.10", "2001:db8::/32")
    monkeypatch.setenv("CLUBWIRE_TRUSTED_PROXIES", "10.0.0.0/8,proxy.example.com")
    with pytest.raises(ValidationError, match=r"'proxy\.example\.com' is not an IP address"):
        Settings(_env_file=None)


def test_api_rate_limits_default_on_and_may_be_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    defaults = Settings(_env_file=None)
    limits = (defaults.api_rate_limit, defaults.api_club_rate_limit)
    assert (*limits, defaults.api_auth_failure_limit) == (600, 1800, 60)
    monkeypatch.setenv("CLUBWIRE_API_RATE_LIMIT", "0")
    monkeypatch.setenv("CLUBWIRE_API_CLUB_RATE_LIMIT", "0")
    off = Settings(_env_file=None)
    assert (off.api_rate_limit, off.api_club_rate_limit) == (0, 0)
    monkeypatch.setenv("CLUBWIRE_API_RATE_LIMIT", "-1")
    with pytest.raises(ValidationError):
        Settings(_env_file=None)


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        *(("CLUBWIRE_API_CLUB_RATE_LIMIT", value) for value in ("-1", "1000001", "lots")),
        *(("CLUBWIRE_RETRY_AFTER_MAX", value) for value in ("-1", "2592001", "12h", "1.5")),
    ],
)
def test_a_number_out_of_range_is_refused_at_start_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv("CLUBWIRE_SECRET_KEY", SECRET)
    monkeypatch.setenv(variable, value)
    with pytest.raises(errors.ConfigurationError) as raised:
        load_settings()
    assert raised.value.detail.startswith(f"{variable}: ")


def test_retry_after_max_defaults_to_12_hours_and_may_keep_to_the_schedule(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert Settings(_env_file=None).retry_after_max == 43200
    monkeypatch.setenv("CLUBWIRE_RETRY_AFTER_MAX", "0")
    assert Settings(_env_file=None).retry_after_max == 0
