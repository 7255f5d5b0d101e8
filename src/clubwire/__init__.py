"""clubwire: the Webhooks & API module of a curling-club platform."""

from __future__ import annotations

__version__ = "0.1.0"
