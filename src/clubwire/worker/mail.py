"""The worker's mailer: takes the outbox's due emails one at a time
(``services.mail.outbox``) and hands each to the SMTP server with the standard library's
``smtplib``, on a thread of its own, so a slow or dead mail server holds up nothing but
the emails (each try is bounded by ``CLUBWIRE_ATTEMPT_TIMEOUT`` per step of the SMTP
conversation, and its lease, ``CLUBWIRE_LEASE_SECONDS``, covers it)."""

from __future__ import annotations

import asyncio
import logging
import smtplib
import ssl
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta
from email.message import EmailMessage

from sqlalchemy.orm import Session, sessionmaker

from clubwire.domain import emails, mail_servers
from clubwire.services.delivery import outbound
from clubwire.services.mail import outbox
from clubwire.settings import Settings
from clubwire.worker import stopping

log = logging.getLogger(__name__)

POLL = 1.0  # seconds between looks at an outbox that had nothing due (or a failed try)


class Transport:
    """One SMTP conversation per email: TLS from the start for ``smtps://``, else STARTTLS
    whenever the server offers it; login when the URL has a user."""

    def __init__(
        self, server: mail_servers.MailServer, tls: ssl.SSLContext, timeout: float
    ) -> None:
        self._server = server
        self._tls = tls
        self._timeout = timeout

    def send(self, message: EmailMessage) -> None:
        """Returns once the server has accepted ``message``; raises otherwise."""
        with self._connect() as smtp:
            if not self._server.implicit_tls:
                smtp.ehlo()
                if smtp.has_extn("starttls"):
                    smtp.starttls(context=self._tls)
                    smtp.ehlo()
            if self._server.username is not None and self._server.password is not None:
                smtp.login(self._server.username, self._server.password)
            smtp.send_message(message)

    def _connect(self) -> smtplib.SMTP:
        server = self._server
        if server.implicit_tls:
            return smtplib.SMTP_SSL(
                server.host, server.port, timeout=self._timeout, context=self._tls
            )
        return smtplib.SMTP(server.host, server.port, timeout=self._timeout)


class Mailer:
    """Sends the outbox's emails one by one: take (leased), send, mark sent or failed."""

    def __init__(
        self,
        settings: Settings,
        sessions: sessionmaker[Session],
        transport: Transport,
        clock: Callable[[], datetime],
    ) -> None:
        self._sessions = sessions
        self._transport = transport
        self._clock = clock
        self._mail_from = settings.mail_from or ""
        self._lease = timedelta(seconds=settings.lease_seconds)

    def send_next(self) -> bool:
        """Send the email due first; False when none was due or the try failed (then wait
        a moment before the next)."""
        taken = outbox.take(self._sessions, self._clock(), self._lease)
        if taken is None:
            return False
        message_id = emails.message_id(taken.id, self._mail_from)
        message = emails.compose(
            self._mail_from, taken.recipient, taken.draft, message_id, taken.created_at
        )
        try:
            self._transport.send(message)
        except (smtplib.SMTPException, OSError) as error:
            said = describe(error)
            log.warning("email %s not sent (try %d): %s", taken.id, taken.tries, said)
            outbox.failed(self._sessions, taken, said, self._clock())
            return False
        outbox.sent(self._sessions, taken, self._clock())
        log.info("email %s sent", taken.id)
        return True


def describe(error: Exception) -> str:
    """What went wrong, without the server's words (which could echo what we sent)."""
    if isinstance(error, smtplib.SMTPResponseException):
        return f"the mail server answered {error.smtp_code} ({type(error).__name__})"
    if isinstance(error, smtplib.SMTPRecipientsRefused):
        codes = sorted({code for code, _ in error.recipients.values()})
        return f"the mail server refused the recipient ({', '.join(map(str, codes))})"
    if isinstance(error, OSError) and error.strerror:
        return f"{type(error).__name__}: {error.strerror}"
    return type(error).__name__


def mailer_for(
    settings: Settings, sessions: sessionmaker[Session], clock: Callable[[], datetime]
) -> Mailer | None:
    """The mailer, or None when email is off."""
    server = settings.mail_server
    if server is None:
        return None
    transport = Transport(server, outbound.tls_context(settings), settings.attempt_timeout)
    return Mailer(settings, sessions, transport, clock)


async def keep_sending(mailer: Mailer, stop: asyncio.Event) -> None:
    """Send due emails until ``stop`` is set (an email being sent is finished first)."""
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(1, thread_name_prefix="clubwire-mail") as thread:
        while not stop.is_set():
            try:
                busy = await loop.run_in_executor(thread, mailer.send_next)
            except Exception:
                log.exception("the email outbox could not be read; trying again shortly")
                busy = False
            if not busy:
                await stopping.stopped_within(stop, POLL)
