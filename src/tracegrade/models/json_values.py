"""Structural comparison and parsing of JSON-like values (tool arguments, attribute payloads)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["arguments_satisfy", "json_equal", "json_subset", "parse_json_maybe"]


def json_equal(a: Any, b: Any) -> bool:
    """Compare two JSON values structurally.

    Objects compare by keys and values, arrays element by element, numbers by value (``1 == 1.0``);
    booleans are not numbers (``True != 1``) and strings are never parsed (``"1" != 1``).
    """
    kind = type(a)
    if kind is type(b):  # the common case: dispatch on one exact type, no isinstance chain
        if kind is dict:
            if len(a) != len(b):
                return False
            for key, value in a.items():
                other = b.get(key, _ABSENT)
                if other is _ABSENT or not json_equal(value, other):
                    return False
            return True
        if kind is list or kind is tuple:
            return len(a) == len(b) and all(map(json_equal, a, b))
        if kind in _SCALARS:
            return a == b
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(map(json_equal, a, b))
    return type(a) is type(b) and a == b


_ABSENT = object()
_SCALARS = frozenset({str, int, float, bool, type(None)})


def arguments_satisfy(actual: dict[str, Any] | None, expected: dict[str, Any]) -> bool:
    """Do a call's arguments (None: not captured) satisfy an expected call's? Any do when nothing is expected;
    else they must be captured and equal as JSON values."""
    return not expected or (actual is not None and json_equal(actual, expected))


def json_subset(actual: Any, expected: Any) -> bool:
    """True when every key of ``expected`` (recursively, for objects) is in ``actual`` with an equal value."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(k in actual and json_subset(actual[k], v) for k, v in expected.items())
    return json_equal(actual, expected)


def parse_json_maybe(value: Any) -> Any:
    """``json.loads`` a string that holds a JSON object or array; anything else comes back unchanged."""
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in ("{", "["):
            try:
                return json.loads(text)
            except ValueError:
                return value
    return value
