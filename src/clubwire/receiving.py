"""A local HTTPS webhook receiver: ``clubwire listen`` and the demo's receiver.

It verifies each delivery with ``clubwire.signing`` (a bad or missing signature gets 400),
reports it, and answers what its ``answer`` callable says. TLS comes from a local CA made
once with trustme and kept in a folder: a worker trusts it through ``CLUBWIRE_CA_BUNDLE``.
``keep`` saves a delivery to files, and ``keep_node_check`` the guide's Node.js check of it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import orjson
import trustme
from aiohttp import web

from clubwire import errors, signing

TLS_FOLDER = "tls"  # in the settings' home folder: shared by `listen` and the demo
CA_FILE = "ca.pem"
CERT_FILE = "receiver.pem"  # the receiver's private key and certificate chain
NAMES = ("localhost", "127.0.0.1", "::1")  # what the certificate is valid for
SHUTDOWN_SECONDS = 1.0


@dataclass(frozen=True)
class Authority:
    """A local CA (``bundle``, what a client trusts) and a receiver certificate it issued."""

    bundle: Path
    certificate: Path

    def server_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(self.certificate)
        return context


def authority(folder: Path) -> Authority:
    """The CA and certificate kept in ``folder``, made on first use (processes may race)."""
    found = Authority(folder / CA_FILE, folder / CERT_FILE)
    if not (found.bundle.exists() and found.certificate.exists()):
        _create(folder)
    return found


def _create(folder: Path) -> None:
    folder.parent.mkdir(parents=True, exist_ok=True)
    draft = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    ca = trustme.CA(organization_name="clubwire local receiver")
    ca.cert_pem.write_to_path(str(draft / CA_FILE))
    ca.issue_cert(*NAMES).private_key_and_cert_chain_pem.write_to_path(str(draft / CERT_FILE))
    try:
        os.rename(draft, folder)  # atomic; fails when the folder exists: someone else made it
    except OSError:
        for path in draft.iterdir():
            path.unlink()
        draft.rmdir()
        if not ((folder / CA_FILE).exists() and (folder / CERT_FILE).exists()):
            raise errors.ConfigurationError(
                f"{folder} lacks {CA_FILE} or {CERT_FILE}: delete that folder to make a new CA."
            ) from None


@dataclass(frozen=True)
class Answer:
    """What the receiver answers a verified delivery, after how long, and with which
    ``Retry-After`` (none when None)."""

    status: int = 200
    delay: float = 0.0
    retry_after: str | None = None


@dataclass(frozen=True)
class Arrival:
    """One delivery as the receiver saw it."""

    kind: str
    delivery_id: str
    body: bytes
    status: int
    seconds: float
    signed_at: int | None  # None: the signature was rejected, for ``problem``
    problem: str | None = None
    signature: str | None = None  # the X-Service-Signature header, as it came

    def envelope(self) -> dict[str, object] | None:
        """The body as JSON, when it is a JSON object."""
        try:
            parsed = orjson.loads(self.body)
        except orjson.JSONDecodeError:
            return None
        return parsed if isinstance(parsed, dict) else None

    def summary(self) -> str:
        """One line: ``✓ payment.completed evt_… dlv_… verified (200)``, or why it was not."""
        if self.problem is not None:
            return f"✗ {self.kind} {self.delivery_id} rejected (400): {self.problem}"
        event_id = (self.envelope() or {}).get("id", "(no event id)")
        slow = f" after {self.seconds:.1f} s" if self.seconds >= 1 else ""
        return f"✓ {self.kind} {event_id} {self.delivery_id} verified ({self.status}{slow})"


class Receiver:
    """Verifies with ``secret``, answers what ``answer`` says, tells ``report`` each arrival."""

    def __init__(
        self,
        secret: str,
        report: Callable[[Arrival], None],
        answer: Callable[[], Answer] = Answer,
    ) -> None:
        self._secret = secret
        self._report = report
        self._answer = answer

    async def handle(self, request: web.Request) -> web.Response:
        started = time.monotonic()
        body = await request.read()
        kind = request.headers.get("X-Service-Event", "(no event kind)")
        delivery_id = request.headers.get("X-Service-Delivery", "(no delivery id)")
        signature = request.headers.get(signing.HEADER)
        try:
            signed_at = signing.verify(body, signature, self._secret)
        except signing.SignatureError as exc:
            self._report(Arrival(kind, delivery_id, body, 400, 0.0, None, str(exc), signature))
            return web.Response(status=400, text=f"signature rejected: {exc}")
        answer = self._answer()
        await asyncio.sleep(answer.delay)
        seconds = time.monotonic() - started
        self._report(
            Arrival(kind, delivery_id, body, answer.status, seconds, signed_at, None, signature)
        )
        headers = {} if answer.retry_after is None else {"Retry-After": answer.retry_after}
        return web.Response(status=answer.status, text=f"answered {answer.status}", headers=headers)


BODY_FILE = "body.json"
SIGNATURE_FILE = "signature.txt"
NODE_CHECK = "check-delivery.mjs"
# The guide's Node.js check of a kept delivery, and the module it imports: shipped in the
# package (clubwire/node/, kept equal to docs/receiving-webhooks.md by tests/docs).
NODE_FILES = ("verify-webhook.mjs", NODE_CHECK)


def keep(folder: Path, body: bytes, signature: str) -> None:
    """Save a delivery as it came, for checking by hand: the exact body bytes in
    ``body.json`` and the ``X-Service-Signature`` header in ``signature.txt`` (each file
    replaced whole, so a reader never sees half of one)."""
    for name, data in ((BODY_FILE, body), (SIGNATURE_FILE, f"{signature}\n".encode())):
        _replace(folder / name, data)


def keep_node_check(folder: Path) -> Path:
    """Write the guide's Node.js check into ``folder``, so that ``node <folder>/check-delivery.mjs
    <kept delivery>`` runs with nothing else installed; the path of the check."""
    source = resources.files("clubwire") / "node"
    for name in NODE_FILES:
        _replace(folder / name, source.joinpath(name).read_bytes())
    return folder / NODE_CHECK


def _replace(path: Path, data: bytes) -> None:
    """Write ``path`` whole: a draft beside it, renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    draft = path.with_name(f".{path.name}.draft")
    draft.write_bytes(data)
    draft.replace(path)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket (port 0: a free one); a port in use is one readable error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        return socket.create_server((host, port), family=family)
    except OSError as exc:
        raise errors.InvalidInput(f"Cannot listen on {host} port {port}: {exc.strerror}.") from None


def url_of(listening: socket.socket, path: str) -> str:
    host, port = listening.getsockname()[:2]
    return f"https://{f'[{host}]' if ':' in host else host}:{port}{path}"


@asynccontextmanager
async def serving(
    receiver: Receiver, tls: Authority, listening: socket.socket
) -> AsyncIterator[None]:
    """Receive on ``listening`` (any path) until the block ends; the socket closes with it."""
    app = web.Application()
    app.router.add_post("/{path:.*}", receiver.handle)
    runner = web.AppRunner(
        app, handle_signals=False, access_log=None, shutdown_timeout=SHUTDOWN_SECONDS
    )
    await runner.setup()
    try:
        await web.SockSite(runner, listening, ssl_context=tls.server_context()).start()
        yield
    finally:
        await runner.cleanup()
