"""Browser tests: Debian's headless Chromium, driven by Playwright, against ``clubwire serve``."""

from __future__ import annotations
