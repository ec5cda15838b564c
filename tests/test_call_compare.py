"""Tool-call comparison: the C twin (where tracegrade is installed compiled) answers exactly as the plain Python.

Both implementations are checked against the JSON-value rules, and against each other on generated values and
call lists. CI asserts that its compiled install has the C twin (`.ci/run`) and runs these tests again on the
pure-Python package, where both names are the plain functions.
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable
from typing import Any

import pytest

from tracegrade.criteria.call_compare import (
    arguments_satisfy,
    calls_satisfy_in_place,
    json_equal,
    plain_arguments_satisfy,
    plain_calls_satisfy_in_place,
    plain_json_equal,
    plain_satisfying_positions,
    satisfying_positions,
)
from tracegrade.models import ToolCall

SATISFY = [pytest.param(plain_arguments_satisfy, id="plain"), pytest.param(arguments_satisfy, id="installed")]
POSITIONS = [
    pytest.param(plain_satisfying_positions, id="plain"),
    pytest.param(satisfying_positions, id="installed"),
]
IN_PLACE = [
    pytest.param(plain_calls_satisfy_in_place, id="plain"),
    pytest.param(calls_satisfy_in_place, id="installed"),
]


class Mapping(dict):  # a dict subclass: compared as a JSON object all the same
    pass


@pytest.mark.parametrize("satisfy", SATISFY)
def test_arguments_compare_as_json_values(satisfy: Callable[[Any, Any], bool]) -> None:
    assert satisfy({"n": 1}, {"n": 1.0})  # numbers by value
    assert not satisfy({"n": True}, {"n": 1}) and not satisfy({"n": 0}, {"n": False})  # booleans are not numbers
    assert not satisfy({"n": "1"}, {"n": 1})  # strings are never parsed
    assert satisfy({"xs": (1, [2])}, {"xs": [1, (2,)]})  # a tuple is an array
    assert satisfy(Mapping(a={"b": [None]}), {"a": Mapping(b=[None])})
    assert not satisfy({"x": math.nan}, {"x": math.nan})  # NaN equals nothing
    assert satisfy({"a": 1, "b": [1, {"c": "d"}]}, {"b": [1, {"c": "d"}], "a": 1})  # key order does not matter
    assert not satisfy({"a": 1}, {"a": 1, "b": None}) and not satisfy({"a": 1, "b": None}, {"a": 1})
    assert not satisfy({"a": [1, 2]}, {"a": [1, 2, 3]})
    assert satisfy(None, {}) and satisfy({"any": "thing"}, {})  # nothing expected: anything satisfies it
    assert not satisfy(None, {"a": 1})  # arguments not captured satisfy no expectation


@pytest.mark.parametrize("satisfy", SATISFY)
def test_values_nested_too_deep_raise_rather_than_crash(satisfy: Callable[[Any, Any], bool]) -> None:
    deep, twin = _nested(200_000), _nested(200_000)
    with pytest.raises(RecursionError):
        satisfy({"a": deep}, {"a": twin})


@pytest.mark.parametrize("satisfy", SATISFY)
def test_a_value_whose_comparison_raises_passes_the_error_on(satisfy: Callable[[Any, Any], bool]) -> None:
    class Unequal:
        def __eq__(self, other: object) -> bool:
            raise ValueError("no comparing me")

        __hash__ = object.__hash__

    with pytest.raises(ValueError, match="no comparing me"):
        satisfy({"a": [Unequal()]}, {"a": [Unequal()]})


def _nested(depth: int) -> list[Any]:
    """``[[[...]]]``, ``depth`` lists deep, built without recursion."""
    outer: list[Any] = []
    tip = outer
    for _ in range(depth - 1):
        tip.append([])
        tip = tip[0]
    return outer


def _value(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(10 if depth < 3 else 6)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.choice([0, 1, -1, 2**70])
    if kind == 2:
        return rng.choice([0.0, 1.0, -0.0, 0.5, math.inf, math.nan])
    if kind in (3, 4, 5):
        return rng.choice(["", "a", "b", "1", "héllo"])
    if kind in (6, 7):
        return {rng.choice("abcd"): _value(rng, depth + 1) for _ in range(rng.randrange(4))}
    if kind == 8:
        return [_value(rng, depth + 1) for _ in range(rng.randrange(4))]
    return tuple(_value(rng, depth + 1) for _ in range(rng.randrange(3)))


def _variant(rng: random.Random, value: Any) -> Any:
    """``value`` copied, sometimes with one change that JSON may or may not see (1 -> 1.0, 1 -> True, a list as a
    tuple, a dict as a subclass, a changed leaf)."""
    change = rng.randrange(8)
    if isinstance(value, dict):
        out: Any = Mapping() if change == 0 else {}
        for key, item in value.items():
            out[key] = _variant(rng, item)
        if change == 1:
            out[rng.choice("abcd")] = _value(rng)
        return out
    if isinstance(value, (list, tuple)):
        items = [_variant(rng, item) for item in value]
        return tuple(items) if change == 0 else items
    if change == 0 and type(value) is int:
        return float(value) if abs(value) < 2**53 else value
    if change == 1 and value in (0, 1) and type(value) is not float:
        return bool(value) if type(value) is int else int(value)
    if change == 2:
        return _value(rng)
    return value


def test_the_twins_agree_on_generated_arguments() -> None:
    rng = random.Random(7)
    answers = {True: 0, False: 0}
    for _ in range(4_000):
        expected = {rng.choice("abcdef"): _value(rng) for _ in range(rng.randrange(4))}
        actual = rng.choice([_variant(rng, expected), copy.deepcopy(expected), None, _variant(rng, expected)])
        answer = plain_arguments_satisfy(actual, expected)
        assert arguments_satisfy(actual, expected) is answer, (actual, expected)
        answers[answer] += 1
    assert min(answers.values()) > 500  # both answers are exercised


def test_the_twins_agree_on_generated_values() -> None:
    rng = random.Random(5)
    answers = {True: 0, False: 0}
    for _ in range(4_000):
        value = _value(rng)
        other = rng.choice([_variant(rng, value), copy.deepcopy(value), _value(rng)])
        answer = plain_json_equal(other, value)
        assert json_equal(other, value) is answer, (other, value)
        answers[answer] += 1
    assert min(answers.values()) > 500


@pytest.mark.parametrize("positions", POSITIONS)
def test_satisfying_positions(positions: Callable[..., list[list[int]]]) -> None:
    table = positions(
        ["search", "book", "search", "pay"],
        ["search", "search", "book", "search"],
        [{"q": "x"}, {}, {"q": "y"}, {"amount": 1}],
        [{"q": "x"}, {"q": "y"}, None, {"q": "x", "page": 2}],
    )
    # namesakes only; ascending; {} accepts uncaptured arguments; an extra key is a difference; nobody called pay
    assert table == [[0], [2], [1], []]
    assert positions([], [], [], []) == [] and positions(("a",), (), ({},), ()) == [[]]
    with pytest.raises(ValueError, match="one name and one argument value per call"):
        positions(["a", "b"], ["a"], [{}], [{}])


def test_the_positions_twins_agree_on_generated_call_lists() -> None:
    rng = random.Random(13)
    found = 0
    for _ in range(2_000):
        expected = _calls(rng, rng.randrange(6))
        actual = [call.model_copy(update={"args": _variant(rng, call.args)}) for call in expected]
        actual += _calls(rng, rng.randrange(3))
        rng.shuffle(actual)
        shapes = (
            [c.name for c in expected],
            [c.name for c in actual],
            [c.args for c in expected],
            [c.args if rng.random() < 0.9 else None for c in actual],
        )
        table = plain_satisfying_positions(*shapes)
        assert satisfying_positions(*shapes) == table, shapes
        found += sum(map(len, table))
    assert found > 2_000


def _calls(rng: random.Random, count: int) -> list[ToolCall]:
    return [
        ToolCall(
            name=rng.choice(["a", "b"]), args={"k": rng.choice([1, 1.0, True, "1", [1]])} if rng.random() < 0.8 else {}
        )
        for _ in range(count)
    ]


@pytest.mark.parametrize("in_place", IN_PLACE)
def test_calls_in_place(in_place: Callable[[list[ToolCall], list[ToolCall]], bool]) -> None:
    expected = [ToolCall(name="search", args={"q": "x"}), ToolCall(name="book")]
    assert in_place([ToolCall(name="search", args={"q": "x"}), ToolCall(name="book", args={"id": 1})], expected)
    assert not in_place([ToolCall(name="book"), ToolCall(name="search", args={"q": "x"})], expected)  # swapped
    assert not in_place([ToolCall(name="search", args={"q": "y"}), ToolCall(name="book")], expected)
    assert not in_place([ToolCall(name="search", args={"q": "x"})], expected)  # one call short
    assert in_place([], []) and in_place((), ())
    # arguments not captured: never in place, even where nothing was expected of them
    uncaptured = ToolCall(name="book", args={}, args_captured=False)
    assert not in_place([ToolCall(name="search", args={"q": "x"}), uncaptured], expected)


def test_the_twins_agree_on_generated_call_lists() -> None:
    rng = random.Random(11)
    answers = {True: 0, False: 0}
    for _ in range(3_000):
        expected = _calls(rng, rng.randrange(4))
        if rng.random() < 0.5:
            actual = [call.model_copy(update={"args": _variant(rng, call.args)}) for call in expected]
        else:
            actual = _calls(rng, rng.randrange(4))
        if actual and rng.random() < 0.1:
            actual[0] = actual[0].model_copy(update={"args_captured": False})
        answer = plain_calls_satisfy_in_place(actual, expected)
        assert calls_satisfy_in_place(actual, expected) is answer
        answers[answer] += 1
    assert min(answers.values()) > 300


def test_the_installed_comparison_needs_sequences() -> None:
    with pytest.raises(TypeError):
        calls_satisfy_in_place(None, [])  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        satisfying_positions(["a"], None, [{}], [])  # type: ignore[arg-type]
