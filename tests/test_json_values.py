"""Structural equality of JSON values (``json_equal``), as tool-argument matching uses it: numbers by value, booleans
apart from numbers, arrays of either Python sequence type alike, objects by keys; at every nesting depth."""

from __future__ import annotations

import math

import pytest

from tracegrade.models.json_values import arguments_satisfy, json_equal

NESTED = {"q": "paris", "filters": {"max": 54, "tags": ["rain", "family"], "flexible": True}, "n": None}


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        (NESTED, {"n": None, "filters": {"tags": ["rain", "family"], "max": 54, "flexible": True}, "q": "paris"}, True),
        ({"max": 1}, {"max": 1.0}, True),  # numbers by value
        ({"max": [1, 2.5]}, {"max": (1.0, 2.5)}, True),  # a tuple is an array
        ({"flag": True}, {"flag": 1}, False),  # a boolean is not a number, in an object
        ([True, 0], [1, False], False),  # nor in an array
        ({"a": {"b": [{"c": True}]}}, {"a": {"b": [{"c": 1.0}]}}, False),  # nor deep down
        ({"a": "1"}, {"a": 1}, False),  # strings are never parsed
        ({"a": 1}, {"b": 1}, False),  # other keys
        ({"a": 1}, {"a": 1, "b": None}, False),  # a key missing on one side
        ({"a": None}, {"b": None}, False),
        ({"x": math.nan}, {"x": math.nan}, False),  # NaN equals nothing
        (["a", "b"], ["b", "a"], False),  # arrays in order
        ({"a": [1, 2]}, {"a": [1, 2, 3]}, False),
    ],
)
def test_json_equal(a: object, b: object, equal: bool) -> None:
    assert json_equal(a, b) is equal and json_equal(b, a) is equal


def test_arguments_satisfy() -> None:
    assert arguments_satisfy(None, {})  # nothing expected: any call does, captured or not
    assert not arguments_satisfy(None, {"q": "paris"})  # expected arguments need captured ones
    assert arguments_satisfy({"q": "paris", "n": 1}, {"n": 1.0, "q": "paris"})
    assert not arguments_satisfy({"q": "paris", "n": True}, {"q": "paris", "n": 1})
