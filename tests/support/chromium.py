"""How tests and benchmarks start Debian's headless Chromium on this closed network.

Without the background-networking flags Chromium keeps trying to reach Google's hosts, which this machine
refuses; each run also needs a fresh ``--user-data-dir`` of its own (added by the caller).
"""

from __future__ import annotations

__all__ = ["CHROMIUM_FLAGS"]

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
