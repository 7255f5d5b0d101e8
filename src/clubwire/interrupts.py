"""A second Ctrl-C: stop at once, and say what that means, instead of a traceback.

The first Ctrl-C (or SIGTERM) stops ``serve``, ``demo`` and ``worker`` gracefully: the
attempts in flight are finished and recorded. Whoever presses Ctrl-C again wants out now.
Nothing is lost by that: the deliveries being attempted are still leased in the database,
and are attempted again when their lease runs out (at least once).
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

EXIT_CODE = 130  # 128 + SIGINT, as shells report an interrupted program
MESSAGE = (
    "clubwire: stopped at once (Ctrl-C twice); deliveries that were being attempted are "
    "attempted again when their lease runs out."
)


def stop_at_once() -> NoReturn:
    """End the process now, after one line on standard error (log lines written first)."""
    sys.stdout.flush()
    sys.stderr.flush()
    sys.stderr.write(MESSAGE + "\n")
    sys.stderr.flush()
    os._exit(EXIT_CODE)
