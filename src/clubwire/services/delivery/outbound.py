"""The outbound HTTP client of webhook attempts, with the safety rules of DESIGN §7.

One :class:`Sender` (one aiohttp session and connector) serves every attempt of a worker, so
connections to a receiver are kept alive and reused. For each attempt:

- the URL is read and checked first (:func:`clubwire.domain.addresses.check_url`), the way
  aiohttp reads it (UTS #46: ``１２７．０．０．１`` is ``127.0.0.1``), and the very URL object
  that was checked is the one sent, so the host aiohttp connects to is the host that was
  judged. aiohttp never asks the resolver about a host that is an IP literal, so literals (in
  every spelling, such as ``2130706433`` or ``🯱🯰.🯰.🯰.🯱``) are judged there;
- names are resolved once, by :class:`PublicResolver`, which drops every non-public address;
  aiohttp connects only to the addresses the resolver returned. aiohttp's DNS cache stays on
  (10 s): it stores the resolver's *filtered* answer, so it can only ever hand out checked
  addresses, and it lets concurrent attempts to one host share a single lookup;
- TLS is verified against the host name (system CAs, plus ``ca_bundle`` when set);
- redirects are not followed, proxy variables and ``.netrc`` are ignored, cookies are not
  kept, ``Accept-Encoding: identity`` is sent and nothing is decompressed;
- one deadline covers the whole attempt (connect, send, headers and body), and connecting
  has its own shorter one;
- at most 64 KiB of the body is read, then reading stops and the connection is dropped. The
  status code decides the outcome once the body has been read to its end or to 64 KiB
  (whichever comes first) within the deadline; a body still trickling in at the deadline is a
  timeout, even after a 2xx status line.

Nothing here logs request bodies, headers or secrets.
"""

from __future__ import annotations

import errno
import functools
import socket
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import NamedTuple, Self

import aiohttp
import yarl
from aiohttp.abc import AbstractResolver, ResolveResult

from clubwire.domain import addresses, text
from clubwire.services.delivery import records
from clubwire.settings import Settings

MAX_RESPONSE_BYTES = 64 * 1024
DNS_CACHE_SECONDS = 10
# Idle pooled connections are dropped before common receiver idle limits (Node.js: 5 s), so a
# POST, which aiohttp never retries, rarely meets a connection the receiver just closed.
KEEPALIVE_SECONDS = 4.0
# Of a redirect's Location, and of a host name, as much as lets their error fit its column.
MAX_LOCATION_CHARACTERS = 160
MAX_HOST_CHARACTERS = 150
_NO_CEILING = 3600.0  # aiohttp rounds deadlines above this up to whole seconds


class Blocked(OSError):
    """Refused by the address policy; the message is the attempt's error, for people."""


class PublicResolver(AbstractResolver):
    """Resolves through ``inner`` once and keeps only globally routable addresses.

    Raises :class:`Blocked` (an ``OSError``, which aiohttp reports as a connection error)
    when nothing is left, so the attempt fails without a connection.
    """

    def __init__(self, inner: AbstractResolver, *, allow_private: bool = False) -> None:
        self._inner = inner
        self._allow_private = allow_private

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        try:
            found = await self._inner.resolve(host, port, family)
        except UnicodeError as exc:  # an impossible name (getaddrinfo encodes it first)
            raise OSError(f"cannot resolve {host!r}: {exc}") from None
        if not found:
            raise OSError(f"{host} has no addresses")
        if self._allow_private:
            return found
        kept = [result for result in found if addresses.is_public_text(result["host"])]
        if not kept:
            shown = text.cleaned(host, MAX_HOST_CHARACTERS)
            raise Blocked(f"blocked: {shown} resolves only to non-public addresses")
        return kept

    async def close(self) -> None:
        await self._inner.close()


class Answer(NamedTuple):
    """What the receiver answered to one post: its status code, or ``error`` when there was no
    answer to take (refused, timed out, blocked, no TLS), and its ``Retry-After`` as given
    (None without one; several are joined with commas, as HTTP joins a field's lines), and
    the ``Location`` of a redirect as its ``error`` quotes it (the receiver's words, which a
    log line leaves out). ``error``, ``excerpt`` and ``retry_after`` are safe to store (valid
    Unicode, control characters escaped, cut to their columns' sizes, ``records.ERROR_LIMIT``,
    ``records.EXCERPT_LIMIT`` and ``records.RETRY_AFTER_LIMIT``); HTML-escape them where they
    are shown."""

    status: int | None
    error: str | None
    duration_ms: int
    excerpt: str = ""
    retry_after: str | None = None
    location: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.status is not None and 200 <= self.status < 300


class Sender:
    """Posts webhook attempts; ``async with Sender(settings) as sender: await sender.post(…)``.

    ``resolver`` replaces the system resolver (tests); it is always wrapped in a
    :class:`PublicResolver`.
    """

    def __init__(self, settings: Settings, resolver: AbstractResolver | None = None) -> None:
        self._allow_private = settings.allow_private_targets
        self._timeout = aiohttp.ClientTimeout(
            total=settings.attempt_timeout,
            connect=settings.connect_timeout,
            sock_connect=settings.connect_timeout,
            ceil_threshold=_NO_CEILING,
        )
        self._tls = tls_context(settings)
        self._inner_resolver = resolver
        self._session: aiohttp.ClientSession | None = None
        self._resolver: PublicResolver | None = None
        # A URL's verdict depends on nothing else: check each one once, not on every attempt.
        self._target = functools.lru_cache(maxsize=4096)(self._check)

    async def __aenter__(self) -> Self:
        inner = self._inner_resolver or aiohttp.ThreadedResolver()
        self._resolver = PublicResolver(inner, allow_private=self._allow_private)
        connector = aiohttp.TCPConnector(
            ssl=self._tls,
            resolver=self._resolver,
            use_dns_cache=True,
            ttl_dns_cache=DNS_CACHE_SECONDS,
            limit=0,  # the worker bounds attempts in flight; no second queue here
            limit_per_host=0,
            keepalive_timeout=KEEPALIVE_SECONDS,
            timeout_ceil_threshold=_NO_CEILING,
        )
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=self._timeout,
            trust_env=False,
            auto_decompress=False,
            cookie_jar=aiohttp.DummyCookieJar(),
            raise_for_status=False,
        )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._resolver is not None:
            await self._resolver.close()
            self._resolver = None

    async def post(self, url: str, body: bytes, headers: Mapping[str, str]) -> Answer:
        """One attempt; network, TLS, HTTP and address problems come back as the answer."""
        session = self._open_session()
        started = time.monotonic()
        attempt = _Attempt()
        target = self._target(url)
        if isinstance(target, str):
            attempt.error = target
            return attempt.answer(started)
        try:
            await self._exchange(session, attempt, target, body, headers)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            attempt.error = error_words(exc)
        return attempt.answer(started)

    def _check(self, url: str) -> yarl.URL | str:
        """The URL to send to, as checked; or why it is refused."""
        try:
            return addresses.check_url(url, self._allow_private)
        except addresses.UnsafeUrl as exc:
            return _refusal(exc)

    async def _exchange(
        self,
        session: aiohttp.ClientSession,
        attempt: _Attempt,
        url: yarl.URL,
        body: bytes,
        headers: Mapping[str, str],
    ) -> None:
        async with session.post(
            url, data=body, headers=_request_headers(headers), allow_redirects=False
        ) as response:
            attempt.status = response.status
            attempt.retry_after = _retry_after(response)
            await _read_capped(response, attempt.body)
            attempt.location = _location(response)
            attempt.error = _redirect_error(response.status, attempt.location)

    def _open_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("use the Sender inside 'async with Sender(settings) as sender'")
        return self._session


def tls_context(settings: Settings) -> ssl.SSLContext:
    """The system's trust store, plus ``ca_bundle`` as an extra CA when set."""
    context = ssl.create_default_context()
    if settings.ca_bundle is not None:
        context.load_verify_locations(cafile=str(settings.ca_bundle))
    return context


@dataclass(slots=True)
class _Attempt:
    status: int | None = None
    error: str | None = None
    retry_after: str | None = None
    location: str | None = None
    body: bytearray = field(default_factory=bytearray)

    def answer(self, started: float) -> Answer:
        """The answer; every error's words end here, so this is where they are made safe
        (and cut to their column), once for the whole pipeline."""
        duration_ms = round((time.monotonic() - started) * 1000)
        error = None if self.error is None else text.cleaned(self.error, records.ERROR_LIMIT)
        return Answer(
            self.status, error, duration_ms, excerpt(self.body), self.retry_after, self.location
        )


def excerpt(body: bytes | bytearray) -> str:
    """The first 1000 characters of ``body`` as UTF-8 (4 bytes at most per character), an
    undecodable byte as U+FFFD, control characters escaped (``\\x00``: PostgreSQL's text
    cannot hold NUL); cut with an ellipsis if escapes make it longer."""
    limit = records.EXCERPT_LIMIT
    decoded = body[: limit * 4].decode("utf-8", errors="replace")
    return text.cleaned(decoded[:limit], limit)


def _request_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The caller's headers, asking for no compression (callers send no Accept-Encoding)."""
    return {**headers, "Accept-Encoding": "identity"}


async def _read_capped(response: aiohttp.ClientResponse, into: bytearray) -> None:
    """Read the body into ``into`` up to 64 KiB; past that, drop the connection."""
    content = response.content
    while len(into) < MAX_RESPONSE_BYTES and not content.at_eof():
        chunk = await content.read(MAX_RESPONSE_BYTES - len(into))
        if not chunk:
            return
        into += chunk
    if not content.at_eof():
        response.close()


def _retry_after(response: aiohttp.ClientResponse) -> str | None:
    """The answer's ``Retry-After``, every one of them, as given and made safe to store."""
    given = response.headers.getall("Retry-After", [])
    if not given:
        return None
    return text.cleaned(", ".join(given), records.RETRY_AFTER_LIMIT)


def _location(response: aiohttp.ClientResponse) -> str | None:
    """A redirect's ``Location``, made safe to store and cut; None when there is none."""
    if not 300 <= response.status < 400:
        return None
    return text.cleaned(response.headers.get("Location", ""), MAX_LOCATION_CHARACTERS) or None


def _redirect_error(status: int, location: str | None) -> str | None:
    if not 300 <= status < 400:
        return None
    target = f" to {location}" if location else ""
    return f"redirect not followed ({status}{target})"


def _refusal(exc: addresses.UnsafeUrl) -> str:
    if isinstance(exc, addresses.NonPublicAddress):
        return f"blocked: {exc}"
    return f"invalid url: {exc}"


# -- errors in plain words ---------------------------------------------------------------

_SOCKET_ERRORS = {
    errno.ECONNREFUSED: "connection refused",
    errno.ECONNRESET: "connection reset",
    errno.ECONNABORTED: "connection reset",
    errno.EPIPE: "connection closed by the receiver",
    errno.ETIMEDOUT: "connect timeout",
    errno.EHOSTUNREACH: "host unreachable",
    errno.ENETUNREACH: "network unreachable",
    errno.EADDRNOTAVAIL: "address not available",
}
_HOST_MISMATCH_CODES = frozenset({62, 64})  # X509_V_ERR_HOSTNAME_MISMATCH, _IP_ADDRESS_
_EXPIRED_CODE = 10  # X509_V_ERR_CERT_HAS_EXPIRED


_ERROR_CLASSES: tuple[tuple[type[BaseException], str], ...] = (
    (aiohttp.ConnectionTimeoutError, "connect timeout"),
    (TimeoutError, "timeout"),
    (aiohttp.ServerDisconnectedError, "connection closed without a complete response"),
    (aiohttp.ClientResponseError, "invalid http response"),
    (aiohttp.InvalidURL, "invalid url"),
)


def error_words(exc: BaseException) -> str:
    """A short class of failure, in plain words, for people and for grouping."""
    if isinstance(exc, aiohttp.ClientConnectorError):
        return _connect_words(exc)
    if isinstance(exc, aiohttp.ClientPayloadError):
        return "connection reset" if _was_reset(exc) else "response body incomplete"
    for kind, words in _ERROR_CLASSES:
        if isinstance(exc, kind):
            return words
    if isinstance(exc, OSError):
        return _socket_words(exc, default="connection failed")
    return "request failed"


def _connect_words(exc: aiohttp.ClientConnectorError) -> str:
    cause = exc.os_error
    if isinstance(cause, Blocked):
        return str(cause)
    if isinstance(exc, aiohttp.ClientConnectorCertificateError):
        return _certificate_words(exc.certificate_error)
    if isinstance(exc, aiohttp.ClientSSLError):
        return "tls: handshake failed"
    if isinstance(exc, aiohttp.ClientConnectorDNSError):
        return "dns: name not resolved"
    return _socket_words(cause, default="connect failed")


def _certificate_words(error: Exception) -> str:
    code = getattr(error, "verify_code", None)
    if code in _HOST_MISMATCH_CODES:
        return "tls: host name mismatch"
    if code == _EXPIRED_CODE:
        return "tls: certificate expired"
    return "tls: certificate verify failed"


def _socket_words(error: OSError, *, default: str) -> str:
    if isinstance(error, TimeoutError):
        return "connect timeout"
    for cause in _chain(error):
        number = getattr(cause, "errno", None)
        if number in _SOCKET_ERRORS:
            return _SOCKET_ERRORS[number]
    return default


def _was_reset(exc: BaseException) -> bool:
    # aiohttp names the socket error of a body cut short only in its message
    return any(
        isinstance(error, ConnectionResetError) or "ConnectionResetError" in str(error)
        for error in _chain(exc)
    )


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` followed by its causes (or contexts), nearest first."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain and len(chain) < 16:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain
