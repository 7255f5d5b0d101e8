"""A real SMTP server on loopback for tests (aiosmtpd, in a thread of its own): plain,
STARTTLS or TLS from the start, with a user and password when asked; it keeps every message
it accepted, parsed, and can run a test's hook before it accepts one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email import message_from_bytes, policy
from email.message import EmailMessage
from typing import Any, Literal

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword

from clubwire.receiving import Authority
from tests.ports import free_port

Security = Literal["plain", "starttls", "tls"]


@dataclass
class Mailbox:
    """What the server accepted; ``before_accepting`` runs before each answer to DATA."""

    user: str | None = None
    password: str | None = None
    before_accepting: Callable[[], None] | None = None
    messages: list[EmailMessage] = field(default_factory=list)
    logins: list[tuple[str, str]] = field(default_factory=list)
    arrived: threading.Condition = field(default_factory=threading.Condition)

    async def handle_DATA(self, _server: Any, _session: Any, envelope: Any) -> str:
        if self.before_accepting is not None:
            self.before_accepting()
        parsed = message_from_bytes(envelope.content, policy=policy.default)
        assert isinstance(parsed, EmailMessage)
        with self.arrived:
            self.messages.append(parsed)
            self.arrived.notify_all()
        return "250 OK"

    def authenticate(
        self, _server: Any, _session: Any, _envelope: Any, _mechanism: str, data: Any
    ) -> AuthResult:
        assert isinstance(data, LoginPassword)
        given = (data.login.decode(), data.password.decode())
        self.logins.append(given)
        return AuthResult(success=given == (self.user, self.password))

    def wait_for(self, count: int, timeout: float = 30.0) -> list[EmailMessage]:
        with self.arrived:
            done = self.arrived.wait_for(lambda: len(self.messages) >= count, timeout)
        assert done, f"expected {count} emails, got {len(self.messages)} in {timeout} s"
        return list(self.messages)

    def to(self, address: str) -> list[EmailMessage]:
        return [m for m in self.messages if m["To"] == address]


@contextmanager
def smtp_server(
    mailbox: Mailbox,
    port: int | None = None,
    security: Security = "plain",
    tls: Authority | None = None,
) -> Iterator[int]:
    """Serve ``mailbox`` on 127.0.0.1 until the block ends; yields the port."""
    options: dict[str, Any] = {"auth_require_tls": False}
    if mailbox.user is not None:
        options["authenticator"] = mailbox.authenticate
    if security != "plain":
        assert tls is not None
        key = "ssl_context" if security == "tls" else "tls_context"
        options[key] = tls.server_context()
        options["require_starttls"] = security == "starttls"
    controller = Controller(mailbox, hostname="127.0.0.1", port=port or free_port(), **options)
    controller.start()
    try:
        yield controller.port
    finally:
        controller.stop()
