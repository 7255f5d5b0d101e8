"""``CLUBWIRE_SMTP_URL`` and ``CLUBWIRE_MAIL_FROM``: read where they enter, refused in one
line that never shows the password."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clubwire import errors
from clubwire.domain import mail_servers
from clubwire.settings import load_settings

pytestmark = pytest.mark.usefixtures("isolated_environment")

PASSWORD = "hunter2-secret"
SECRET = "a-secret-key-for-the-unit-tests-0123456789"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("smtp://mail.example", mail_servers.MailServer("mail.example", 25, False)),
        ("smtps://mail.example", mail_servers.MailServer("mail.example", 465, True)),
        (
            "smtp://u%40club:p%3Aw%2Fd%25@mail.example:587",
            mail_servers.MailServer("mail.example", 587, False, "u@club", "p:w/d%"),
        ),
        ("smtps://[::1]:2465/", mail_servers.MailServer("::1", 2465, True)),
    ],
)
def test_a_url_names_the_server(url: str, expected: mail_servers.MailServer) -> None:
    assert mail_servers.parse(url) == expected


@pytest.mark.parametrize(
    ("url", "says"),
    [
        (f"http://u:{PASSWORD}@mail.example", "must start with smtp:// or smtps://"),
        (f"smtp://u:{PASSWORD}@mail.example:99999", "is not a URL like"),
        (f"smtp://u:{PASSWORD}@:25", "names no host"),
        (f"smtp://u:{PASSWORD}@mail.example/inbox?x=1", "no path or query"),
        ("smtp://user@mail.example", "both a user and a password"),
    ],
)
def test_a_bad_url_is_one_line_without_the_password(url: str, says: str) -> None:
    with pytest.raises(errors.ConfigurationError) as refused:
        load_settings(smtp_url=url, mail_from="hooks@club.example", secret_key=SECRET)
    assert str(refused.value).startswith("CLUBWIRE_SMTP_URL: ")
    assert says in str(refused.value)
    assert PASSWORD not in str(refused.value)
    assert "\n" not in str(refused.value)


@given(st.text(min_size=1, max_size=40), st.text(min_size=1, max_size=40))
def test_any_user_and_password_come_back_percent_decoded(user: str, password: str) -> None:
    url = f"smtps://{quote(user, safe='')}:{quote(password, safe='')}@mail.example"
    server = mail_servers.parse(url)
    assert (server.username, server.password) == (user, password)


@pytest.mark.parametrize("sender", ["nobody", "a@b.example\r\nBcc: c@d.example", "x\x00@y.z"])
def test_a_bad_sender_is_refused(sender: str) -> None:
    with pytest.raises(errors.ConfigurationError, match="CLUBWIRE_MAIL_FROM"):
        load_settings(smtp_url="smtp://mail.example", mail_from=sender, secret_key=SECRET)


@pytest.mark.parametrize("given_only", ["smtp_url", "mail_from"])
def test_the_two_settings_go_together(given_only: str) -> None:
    values = {"smtp_url": "smtp://mail.example", "mail_from": "hooks@club.example"}
    with pytest.raises(errors.ConfigurationError, match="go together"):
        load_settings(**{given_only: values[given_only]}, secret_key=SECRET)


def test_the_password_stays_out_of_the_settings_repr() -> None:
    url = f"smtp://hooks:{PASSWORD}@mail.example:587"
    settings = load_settings(smtp_url=url, mail_from="hooks@club.example", secret_key=SECRET)
    assert PASSWORD not in repr(settings)
    assert PASSWORD not in repr(settings.mail_server)
    assert settings.mail_server is not None
    assert settings.mail_server.password == PASSWORD


def test_a_worker_started_with_a_bad_url_says_so_in_one_line(tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items() if not name.startswith("CLUBWIRE_")}
    env |= {
        "CLUBWIRE_HOME": str(tmp_path),
        "CLUBWIRE_SMTP_URL": f"smtp://hooks:{PASSWORD}@mail.example:nope",
        "CLUBWIRE_MAIL_FROM": "hooks@club.example",
    }
    ran = subprocess.run(
        [sys.executable, "-m", "clubwire", "worker"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode != 0
    assert ran.stderr.strip().splitlines() == [
        "clubwire: error: CLUBWIRE_SMTP_URL: Value error, is not a URL like "
        "smtp://user:password@host:587"
    ]
