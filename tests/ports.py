"""Free TCP ports on 127.0.0.1 for the servers tests start, safe across test processes.

A test picks a port, then hands it to a server that binds it a moment later (often another
process). Binding port 0 to pick one is racy when tests run in parallel (``make test`` runs
pytest-xdist workers): once the probe closes, the kernel may give the same port to any other
``bind(("…", 0))`` or outgoing connection, e.g. another worker's. So ports come from below
Linux's ephemeral range (32768–60999 by default), which the kernel never hands out by itself,
and each one is claimed by an exclusive lock on a file named after it, which this process
holds until it has picked ``HELD`` more ports (far longer than a server takes to bind): no
other test process, of this run or another, is given it meanwhile.
"""

from __future__ import annotations

import atexit
import fcntl
import random
import socket
import tempfile
from collections import deque
from pathlib import Path
from typing import IO

PORTS = range(20000, 32000)
LOCKS = Path(tempfile.gettempdir()) / "clubwire-test-ports"
HELD = 256

_claims: deque[IO[bytes]] = deque()


@atexit.register
def _release() -> None:
    """Close the claims still held as the process ends (Python warned of each file left open)."""
    while _claims:
        _claims.popleft().close()


def free_port() -> int:
    """A port nothing listens on, which no other test process is given while this one may
    still hand it to a server."""
    LOCKS.mkdir(exist_ok=True)
    for port in random.sample(PORTS, len(PORTS)):
        if _claim(port) and _bindable(port):
            return port
    raise RuntimeError(f"no free port in {PORTS}")


def _claim(port: int) -> bool:
    handle = (LOCKS / str(port)).open("ab")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        return False
    _claims.append(handle)
    if len(_claims) > HELD:
        _claims.popleft().close()  # closing the file releases its lock
    return True


def _bindable(port: int) -> bool:
    """Whether nothing (a service of the machine's, a server still running) holds the port."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True
