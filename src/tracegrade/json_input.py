"""Reading a JSON request body: Python's parser raises RecursionError, not ValueError, for arrays or objects nested
a thousand levels deep, which a handler that catches ValueError let through as a 500 (``/v1/query``, ``/v1/runs``,
``/v1/forget``, the web UI's JSON API)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["parse_json"]


def parse_json(body: bytes | str) -> Any:
    """``body`` parsed as JSON. ValueError for text that is not JSON or is nested too deeply for the parser, and
    UnicodeDecodeError for bytes that are not UTF-8 (one of its subclasses)."""
    try:
        return json.loads(body)
    except RecursionError:
        raise ValueError(
            "it is nested too deeply for the parser (a thousand levels of arrays or objects or more)"
        ) from None
