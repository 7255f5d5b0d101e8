from __future__ import annotations

from clubwire.cli import main

main()
