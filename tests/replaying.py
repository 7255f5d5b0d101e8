"""Where ``make_delivery`` was: it is a factory now, in ``tests/factories.py``. Replay's
functional and browser tests still import it from here, while another branch edits them;
their import moves with the next change to them, and this module goes."""

from __future__ import annotations

from tests.factories import make_delivery

__all__ = ["make_delivery"]
