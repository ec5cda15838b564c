"""Comparing recorded tool calls with expected ones: the questions the trajectory criterion asks most.

* :func:`calls_satisfy_in_place`: does every recorded call satisfy the expected call at its own position? The
  criterion asks this first for every graded case; a run that did what was expected answers yes, and then every
  match type pairs the two lists position by position with no per-pair bookkeeping.
* :func:`satisfying_positions`: otherwise, which recorded calls satisfy each expected call? The matcher pairs
  the calls from that table, and the reasons for the unmatched ones read it too.
* :func:`arguments_satisfy`: do a call's arguments satisfy an expected call's (the matcher's predicate)?
* :func:`json_equal`: are two argument values equal as JSON values (the reasons' argument differences)?

The ``plain_`` functions here are the Python answers; where tracegrade was installed compiled, the C extension
``_call_compare`` (their twin, which tests compare with these) answers instead.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracegrade.models.dataset import ToolCall
from tracegrade.models.json_values import arguments_satisfy as plain_arguments_satisfy
from tracegrade.models.json_values import json_equal as plain_json_equal

__all__ = [
    "COMPILED",
    "arguments_satisfy",
    "calls_satisfy_in_place",
    "json_equal",
    "plain_arguments_satisfy",
    "plain_calls_satisfy_in_place",
    "plain_json_equal",
    "plain_satisfying_positions",
    "satisfying_positions",
]


def plain_calls_satisfy_in_place(actual_calls: Sequence[ToolCall], expected_calls: Sequence[ToolCall]) -> bool:
    """As many calls on both sides, and each actual call has its arguments captured, the name of the expected call
    at its position and arguments that satisfy it (:func:`plain_arguments_satisfy`).

    A call whose arguments were not captured is never in place, even where nothing was expected of them: the
    criterion then says which tools lacked arguments it had to compare."""
    return len(actual_calls) == len(expected_calls) and all(
        actual.args_captured and actual.name == expected.name and plain_arguments_satisfy(actual.args, expected.args)
        for actual, expected in zip(actual_calls, expected_calls)
    )


def plain_satisfying_positions(
    expected_names: Sequence[str],
    actual_names: Sequence[str],
    expected_args: Sequence[dict[str, Any] | None],
    actual_args: Sequence[dict[str, Any] | None],
) -> list[list[int]]:
    """For each expected call, the indices (ascending) of the recorded calls with its name whose arguments
    (``None``: not captured) satisfy it (:func:`plain_arguments_satisfy`)."""
    if len(expected_names) != len(expected_args) or len(actual_names) != len(actual_args):
        raise ValueError("satisfying_positions needs one name and one argument value per call")
    by_name: dict[str, list[int]] = {}
    for j, name in enumerate(actual_names):
        by_name.setdefault(name, []).append(j)
    return [
        [j for j in by_name.get(name, ()) if plain_arguments_satisfy(actual_args[j], wanted)]
        for name, wanted in zip(expected_names, expected_args)
    ]


try:
    from tracegrade.criteria._call_compare import (
        arguments_satisfy,
        calls_satisfy_in_place,
        json_equal,
        satisfying_positions,
    )
except ImportError:  # installed without a C compiler, or editable without TRACEGRADE_COMPILE=1
    arguments_satisfy, calls_satisfy_in_place = plain_arguments_satisfy, plain_calls_satisfy_in_place
    json_equal, satisfying_positions = plain_json_equal, plain_satisfying_positions
    COMPILED = False
else:
    COMPILED = True
