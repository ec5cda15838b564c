"""Comparing a recorded tool call's arguments with an expected call's, under per-tool rules.

Without a rule the documented default applies (``ToolCall.matches``): the whole argument object must
be structurally equal, and an expected call with ``args={}`` accepts any arguments. A
:class:`~tracegrade.models.config.ToolArgsRule` can relax this per tool: ``subset`` (expected keys must
be present with equal values, extra keys are fine), ``keys`` (only the listed keys are compared) or
``ignore``. Values always compare as JSON values (``1 == 1.0``, ``"1" != 1``), never as text.
"""

from __future__ import annotations

from typing import Any

from tracegrade.criteria.call_compare import json_equal
from tracegrade.models.config import ArgMatchMode, ToolArgsRule
from tracegrade.models.dataset import ToolCall
from tracegrade.models.json_values import json_subset

__all__ = ["args_compared", "call_satisfies", "describe_arg_difference"]

_MAX_DIFFERENCES = 3
_MAX_VALUE_CHARS = 60


def args_compared(expected: ToolCall, rule: ToolArgsRule | None) -> bool:
    """Would ``expected``'s arguments be compared at all (with ``check_args`` on)?"""
    return bool(expected.args) and (rule is None or rule.mode is not ArgMatchMode.IGNORE)


def call_satisfies(actual: ToolCall, expected: ToolCall, check_args: bool, rule: ToolArgsRule | None) -> bool:
    """Does the recorded ``actual`` call satisfy ``expected``?"""
    if rule is None or not check_args:
        return actual.matches(expected, check_args=check_args)
    if actual.name != expected.name:
        return False
    if not args_compared(expected, rule):
        return True
    if not actual.args_captured:
        return False
    if rule.mode is ArgMatchMode.SUBSET:
        return json_subset(actual.args, expected.args)
    if rule.mode is ArgMatchMode.KEYS:
        return all(_same_key(actual.args, expected.args, key) for key in rule.keys)
    return json_equal(actual.args, expected.args)


def _same_key(actual: dict[str, Any], expected: dict[str, Any], key: str) -> bool:
    if (key in actual) != (key in expected):
        return False
    return key not in actual or json_equal(actual[key], expected[key])


def describe_arg_difference(actual: ToolCall, expected: ToolCall, rule: ToolArgsRule | None) -> str:
    """The first few argument differences, e.g. ``key 'city': expected 'Paris', got 'Lyon'``."""
    mode = rule.mode if rule is not None else ArgMatchMode.EXACT
    if mode is ArgMatchMode.KEYS:
        differences = [
            _key_difference(key, actual.args, expected.args)
            for key in rule.keys  # type: ignore[union-attr]
            if not _same_key(actual.args, expected.args, key)
        ]
    else:
        differences = _differences(actual.args, expected.args, "", allow_extra=mode is ArgMatchMode.SUBSET)
    shown = "; ".join(differences[:_MAX_DIFFERENCES])
    more = len(differences) - _MAX_DIFFERENCES
    return shown + (f"; and {more} more" if more > 0 else "") if differences else "arguments differ"


def _key_difference(key: str, actual: dict[str, Any], expected: dict[str, Any]) -> str:
    if key not in actual:
        return f"key {key!r} missing (expected {_short(expected[key])})"
    if key not in expected:
        return f"unexpected key {key!r}"
    return f"key {key!r}: expected {_short(expected[key])}, got {_short(actual[key])}"


def _differences(actual: Any, expected: Any, path: str, allow_extra: bool) -> list[str]:
    if isinstance(actual, dict) and isinstance(expected, dict):
        found = []
        for key, value in expected.items():
            if key in actual and json_equal(actual[key], value):
                continue
            where = f"{path}.{key}" if path else str(key)
            if key not in actual:
                found.append(f"key {where!r} missing (expected {_short(value)})")
            else:
                found += _differences(actual[key], value, where, allow_extra)
        if not allow_extra:
            found += [f"unexpected key {f'{path}.{k}' if path else str(k)!r}" for k in actual if k not in expected]
        return found
    if json_equal(actual, expected):
        return []
    if isinstance(actual, list) and isinstance(expected, list) and len(actual) == len(expected):
        # the element that differs, not the whole list; inside a list values must be equal (no subset)
        return [
            difference
            for i, (got, wanted) in enumerate(zip(actual, expected))
            for difference in _differences(got, wanted, f"{path}[{i}]", allow_extra=False)
        ]
    where = f"key {path!r}: " if path else ""
    return [f"{where}expected {_short(expected)}, got {_short(actual)}"]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[: _MAX_VALUE_CHARS - 1] + "…"
