"""Structural comparison and parsing of JSON-like values (tool arguments, attribute payloads).

:func:`json_equal` is the reference for comparing argument values; the trajectory criterion's common path runs its
C twin (:mod:`tracegrade.criteria.call_compare`), which hands any value outside the built-in JSON types back here.
"""

from __future__ import annotations

import json
from typing import Any, Final

__all__ = ["arguments_satisfy", "json_equal", "json_subset", "parse_json_maybe"]

_ABSENT: Final[Any] = object()  # a key missing from the other object


def json_equal(a: Any, b: Any) -> bool:
    """Compare two JSON values structurally.

    Objects compare by keys and values, arrays element by element, numbers by value (``1 == 1.0``);
    booleans are not numbers (``True != 1``) and strings are never parsed (``"1" != 1``).
    """
    kind = type(a)
    if kind is type(b):  # the common case: dispatch on one exact type, no isinstance chain
        if kind is dict:
            return _dicts_equal(a, b)
        if kind is list:
            return _lists_equal(a, b)
        if kind is str or kind is int or kind is float or kind is bool or a is None:
            return bool(a == b)
        if kind is tuple:
            return _sequences_equal(a, b)
    return _loosely_equal(a, b)


def _dicts_equal(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    if len(a) != len(b):
        return False
    for key, value in a.items():
        other = b.get(key, _ABSENT)
        if other is _ABSENT or not json_equal(value, other):
            return False
    return True


def _lists_equal(a: list[Any], b: list[Any]) -> bool:
    size = len(a)
    return size == len(b) and all(json_equal(a[index], b[index]) for index in range(size))


def _sequences_equal(a: Any, b: Any) -> bool:
    """Lists and tuples, in any mix (a tuple is an array)."""
    return len(a) == len(b) and all(json_equal(left, right) for left, right in zip(a, b))


def _loosely_equal(a: Any, b: Any) -> bool:
    """Values of different (or unusual) types: numbers by value, subclasses of dict/list/tuple structurally."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and bool(a == b)
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return bool(a == b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[key], b[key]) for key in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return _sequences_equal(a, b)
    return type(a) is type(b) and bool(a == b)


def arguments_satisfy(actual: dict[str, Any] | None, expected: dict[str, Any] | None) -> bool:
    """Do a call's arguments (None: not captured) satisfy an expected call's? Any do when nothing is expected;
    else they must be captured and equal as JSON values."""
    return not expected or (actual is not None and json_equal(actual, expected))


def json_subset(actual: Any, expected: Any) -> bool:
    """True when every key of ``expected`` (recursively, for objects) is in ``actual`` with an equal value."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        return all(key in actual and json_subset(actual[key], value) for key, value in expected.items())
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
