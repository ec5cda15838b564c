"""Durations and points in time as commands take them: the one parser of ``--since``, ``--every`` and ``--keep``.

A duration is a positive number with a unit (``30s``, ``15m``, ``2h``, ``7d``, ``1w``, ``2 hours``); nothing
else is read as one, so a date given where a duration is expected (``--keep 2099-01-01``) is refused rather
than turned into a negative span. ``--since`` also takes an ISO 8601 time. Both are bounded: a duration of at
most :data:`MAX_DURATION`, a time within what ``datetime`` holds in UTC, so a huge value is a clear error
instead of an ``OverflowError``.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

from tracegrade.errors import InvalidValueError

__all__ = ["MAX_DURATION", "parse_duration", "parse_since", "utc_now"]

_UNITS = {
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), 1),
    **dict.fromkeys(("m", "min", "mins", "minute", "minutes"), 60),
    **dict.fromkeys(("h", "hr", "hrs", "hour", "hours"), 3600),
    **dict.fromkeys(("d", "day", "days"), 86400),
    **dict.fromkeys(("w", "week", "weeks"), 604800),
}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]+)\s*$")
# A century: longer than any retention or look-back anyone means, and far inside what datetime arithmetic
# (and threading's wait) can hold, so `now - duration` never overflows.
MAX_DURATION = timedelta(days=36500)
_DURATION_FORMS = "a duration such as 30s, 15m, 2h, 7d, 1w or '2 hours'"


def utc_now() -> datetime:
    """Now as a naive UTC datetime (how the store keeps timestamps)."""
    return datetime.now(timezone.utc).replace(tzinfo=None)


def _duration(value: str, option: str) -> timedelta | None:
    """The span ``value`` names when it has a duration's form (None otherwise); out of range is an error."""
    match = _DURATION.match(value)
    if match is None or match.group(2).lower() not in _UNITS:
        return None
    seconds = float(match.group(1)) * _UNITS[match.group(2).lower()]
    if seconds > MAX_DURATION.total_seconds():
        raise InvalidValueError(f"{option} {value!r} is out of range (at most {MAX_DURATION.days}d, a century)")
    return timedelta(seconds=seconds)


def parse_duration(value: str, option: str, *, allow_zero: bool = False) -> timedelta:
    """The positive span ``value`` names (``allow_zero``: ``0s`` too); InvalidValueError naming ``option`` and
    the accepted forms for anything else, a date or a bare number included."""
    span = _duration(value, option)
    if span is None:
        raise InvalidValueError(f"{option} {value!r} is not a duration: use {_DURATION_FORMS} (a number with a unit)")
    if span <= timedelta(0) and not (allow_zero and span == timedelta(0)):
        least = "0s or longer" if allow_zero else "longer than zero"
        raise InvalidValueError(f"{option} {value!r} must be {least}: use {_DURATION_FORMS}")
    return span


def parse_since(value: str, option: str = "--since") -> datetime:
    """The naive-UTC instant a ``--since`` value names: a duration back from now, or an ISO 8601 time (a time
    with an offset is converted to UTC); InvalidValueError naming ``option`` and the accepted forms."""
    span = _duration(value, option)
    if span is not None:
        return utc_now() - span
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidValueError(
            f"cannot read {option} {value!r}: use {_DURATION_FORMS}, or an ISO time such as 2026-11-30T08:00:00Z"
        ) from None
    if moment.tzinfo is None:
        return moment
    try:
        return moment.astimezone(timezone.utc).replace(tzinfo=None)
    except OverflowError:  # 9999-12-31T23:59:59-05:00 is past the last UTC time datetime holds
        raise InvalidValueError(
            f"{option} {value!r} is out of range (at most 9999-12-31T23:59:59 in UTC, at least 0001-01-01)"
        ) from None
