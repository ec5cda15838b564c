"""Lazy, offline-safe litellm import: the local cost map, no debug banners, nothing on import.

Importing tracegrade never imports litellm; the first judge call does, through ``load_litellm``.
"""

from __future__ import annotations

import os
from functools import cache
from types import ModuleType

__all__ = ["load_litellm"]


@cache
def load_litellm() -> ModuleType:
    """Import and configure litellm once (use the bundled cost map so import never reaches the network)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True  # no "Give Feedback" banners on every handled error
    return litellm
