"""Waiting that a stop cuts short, for the worker's periodic tasks."""

from __future__ import annotations

import asyncio


async def stopped_within(stop: asyncio.Event, seconds: float) -> bool:
    """Whether ``stop`` was set within ``seconds`` (waiting no longer than that)."""
    try:
        await asyncio.wait_for(stop.wait(), seconds)
    except TimeoutError:
        return False
    return True
