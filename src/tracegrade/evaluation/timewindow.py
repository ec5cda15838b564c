"""Parsing ``--since`` values: a duration back from now (``15m``, ``2h``, ``7d``, ``2 hours``) or an ISO time."""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from tracegrade.errors import InvalidValueError

__all__ = ["parse_since", "utc_now"]

_UNITS = {
    "s": 1,
    "sec": 1,
    "secs": 1,
    "second": 1,
    "seconds": 1,
    "m": 60,
    "min": 60,
    "mins": 60,
    "minute": 60,
    "minutes": 60,
    "h": 3600,
    "hr": 3600,
    "hrs": 3600,
    "hour": 3600,
    "hours": 3600,
    "d": 86400,
    "day": 86400,
    "days": 86400,
    "w": 604800,
    "week": 604800,
    "weeks": 604800,
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")


def utc_now() -> datetime:
    """Now as a naive UTC datetime (how the store keeps timestamps)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def parse_since(value: str) -> datetime:
    """The naive-UTC instant a ``--since`` value names; raises ValueError with the accepted forms."""
    m = _DURATION.match(value)
    if m and m.group(2).lower() in _UNITS:
        return utc_now() - timedelta(seconds=float(m.group(1)) * _UNITS[m.group(2).lower()])
    try:
        parsed = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidValueError(
            f"cannot read --since {value!r}: use a duration such as 30m, 2h, 7d or '2 hours', "
            "or an ISO time such as 2026-11-30T08:00:00Z"
        ) from None
    if parsed.tzinfo is not None:
        parsed = parsed.astimezone(timezone.utc).replace(tzinfo=None)
    return parsed
