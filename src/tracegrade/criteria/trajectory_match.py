"""Trajectory criteria: which tools were called (and how), and which nodes the run went through.

All three are pure (``SyncCriterion``). Expected values are concatenated over every turn of the case;
the actual values are the accumulated execution of all turns. Tool and node matching share one
sequence matcher (:mod:`tracegrade.criteria.sequence_match`), so EXACT / IN_ORDER / ANY_ORDER mean the
same thing for both, and both report partial-credit details: ``matches`` (which expected item matched
which actual item), ``missing`` (expected items not matched, with the reason) and ``extra``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from tracegrade.criteria.base import SyncCriterion
from tracegrade.criteria.call_compare import arguments_satisfy, calls_satisfy_in_place, satisfying_positions
from tracegrade.criteria.registry import register_criterion
from tracegrade.criteria.sequence_match import (
    SequenceMatch,
    aligned_pair_details,
    match_sequences,
    pair_details,
    why_unmatched,
)
from tracegrade.criteria.tool_args import args_compared, call_satisfies, describe_arg_difference
from tracegrade.criteria.tool_calls import call_entry, call_views
from tracegrade.models.config import ArgMatchMode, MatchType, ToolArgsRule
from tracegrade.models.dataset import EvalCase, ToolCall
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult

__all__ = ["ARGS_NOT_COMPARED", "NodeOrderMatchCriterion", "ToolNameMatchCriterion", "TrajectoryMatchCriterion"]

# What the matcher compares: the expected and actual items and the predicate (None: equal names suffice)
_Compared = tuple[Sequence[Any], Sequence[Any], Callable[[Any, Any], bool] | None]

_DIFFERENT_ARGUMENTS = "called with different arguments"  # a missing call's reason when its namesake differs
_SHOWN_CALLS = 2  # calls whose argument differences the reason spells out

#: appended to the reason when expected calls list arguments that ``check_args=False`` leaves uncompared
ARGS_NOT_COMPARED = "Arguments were not compared (check_args is off); set check_args=true to compare them."


def _reason(score: float, noun: str, expected: list[str], actual: list[str]) -> str:
    if not expected:
        return f"No {noun} expected; got {actual}."
    shown = repr(expected)
    got = shown if actual == expected else repr(actual)  # the common case: one list written once
    return f"Matched {score * 100:.0f}% of expected {noun}. Expected {shown}, got {got}."


def _argument_differences(
    missing: list[dict[str, Any]], calls: tuple[list[ToolCall], list[ToolCall]], rules: dict[str, ToolArgsRule]
) -> str:
    """The reason's sentence on expected calls that went unmatched for their arguments: which call, which argument
    path, expected and actual value (the first :data:`_SHOWN_CALLS` calls; all are in ``missing``).

    Those are the calls whose namesake was called with other arguments, and, when the names match position by
    position (``['get_weather', 'get_weather']`` both sides, the calls swapped), every unmatched one, compared
    with the call at its position: the matcher's "out of order" alone would read as a contradiction."""
    prefix = f"{_DIFFERENT_ARGUMENTS}: "
    expected_calls, actual_calls = calls
    same_names: bool | None = None  # read only when a call went unmatched for another reason than its arguments
    differing: list[tuple[dict[str, Any], str]] = []
    for entry in missing:
        if entry["reason"].startswith(prefix):
            differing.append((entry, entry["reason"].removeprefix(prefix)))
            continue
        if same_names is None:
            same_names = [c.name for c in expected_calls] == [c.name for c in actual_calls]
        if same_names:
            wanted = expected_calls[entry["expected_index"]]
            got = actual_calls[entry["expected_index"]]
            differing.append((entry, describe_arg_difference(got, wanted, rules.get(wanted.name))))
    if not differing:
        return ""
    shown = "; ".join(
        f"{entry['name']} (expected #{entry['expected_index']}): {difference}"
        for entry, difference in differing[:_SHOWN_CALLS]
    )
    more = len(differing) - _SHOWN_CALLS
    return (
        f" {len(differing)} of the expected calls had different arguments: {shown}"
        + (f"; and {more} more call(s)" if more > 0 else "")
        + "."
    )


@register_criterion("trajectory", "trajectory_match")
class TrajectoryMatchCriterion(SyncCriterion):
    """Compares the recorded tool calls with the expected ones (``match_type``, ``check_args``, ``tool_args``)."""

    name = "tool_trajectory_avg_score"
    description = "Tool-call trajectory matches the expected tools (EXACT, IN_ORDER or ANY_ORDER)"
    reads = frozenset({"tool_calls"})

    def validate_config(self) -> list[str]:
        problems = super().validate_config()
        for tool, rule in self.config.tool_args.items():
            if rule.mode is ArgMatchMode.KEYS and not rule.keys:
                problems.append(f"tool_args[{tool!r}].keys: mode 'keys' needs a non-empty 'keys' list")
            if rule.keys and rule.mode is not ArgMatchMode.KEYS:
                problems.append(f"tool_args[{tool!r}].keys: 'keys' is only used with mode 'keys'")
        return problems

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_calls = expected.expected_tools()
        actual_calls = list(actual.tool_calls)  # the details keep this list: later turns must not extend it
        check_args = self.config.check_args
        rules = self.config.tool_args
        trajectories = (expected_calls, actual_calls)
        if not rules and check_args and calls_satisfy_in_place(actual_calls, expected_calls):
            # the usual graded run: every call as expected at its own position, which every match type pairs
            # position by position; the calls are read again only for their names
            in_order = [call.name for call in expected_calls]
            matches = aligned_pair_details(in_order)
            return self._result(1.0, self._details(1.0, (in_order, in_order), matches, [], [], trajectories))
        wanted, called = call_views(expected_calls), call_views(actual_calls)
        if check_args and not called.all_captured:
            uncaptured = self._uncaptured_tools(expected_calls, actual_calls)
            if uncaptured:
                return self._failure(
                    f"arguments not captured for {', '.join(map(repr, uncaptured))}: the trace recorded these "
                    "calls without their arguments, so check_args cannot compare them; enable tool content "
                    "capture in the instrumentation, or turn check_args off (or set tool_args "
                    "{name: {'mode': 'ignore'}}) for these tools",
                    {"uncaptured_tools": uncaptured, "check_args": True},
                )
        names = (wanted.names, called.names)  # a call only satisfies an expected call of the same name
        compared: _Compared
        satisfying = None
        if rules:
            compared = (expected_calls, actual_calls, self._predicate(check_args, rules))
        elif check_args:  # the same test on the arguments alone, read once per call, every pair in one pass
            compared = (wanted.arguments, called.arguments, arguments_satisfy)
            satisfying = satisfying_positions(wanted.names, called.names, wanted.arguments, called.arguments)
        else:
            compared = (wanted.arguments, called.arguments, None)
        match = match_sequences(compared[0], compared[1], self.config.match_type, compared[2], names, satisfying)
        missing = [
            {
                **call_entry(expected_calls[i]),
                "expected_index": i,
                "reason": self._missing_reason(i, expected_calls, actual_calls, match, compared, names),
            }
            for i in match.missing
        ]
        extra = [{**call_entry(actual_calls[j]), "actual_index": j} for j in match.extra]
        matches = pair_details(match, wanted.names)
        return self._result(match.score, self._details(match.score, names, matches, missing, extra, trajectories))

    def _details(
        self,
        score: float,
        names: tuple[list[str], list[str]],
        matches: list[dict[str, Any]],
        missing: list[dict[str, Any]],
        extra: list[dict[str, Any]],
        trajectories: tuple[list[ToolCall], list[ToolCall]],
    ) -> dict[str, Any]:
        """The result's details: the reason, the partial credit, and both trajectories (the calls themselves)."""
        check_args = self.config.check_args
        reason = _reason(score, "tools", *names)
        # the same names on both sides would read as a contradiction without saying which arguments differ
        reason += _argument_differences(missing, trajectories, self.config.tool_args)
        if not check_args and any(c.args for c in trajectories[0]):
            # check_args=False is the seed's default; say so, or an expected city=Bergen "passes" against Oslo
            reason += f" {ARGS_NOT_COMPARED}"
        return {
            "reason": reason,
            "match_type": self.config.match_type.value,
            "check_args": check_args,
            "matches": matches,
            "missing": missing,
            "extra": extra,
            "expected_trajectory": trajectories[0],
            "actual_trajectory": trajectories[1],
        }

    @staticmethod
    def _predicate(check_args: bool, rules: dict[str, ToolArgsRule]) -> Callable[[ToolCall, ToolCall], bool]:
        """Does a recorded call satisfy an expected call of its name, under the per-tool rules?"""
        return lambda call, wanted: call_satisfies(call, wanted, check_args, rules.get(wanted.name))

    def _uncaptured_tools(self, expected_calls: list[ToolCall], actual_calls: list[ToolCall]) -> list[str]:
        """Tools whose arguments must be compared but whose recorded calls carry no captured arguments."""
        compared = {e.name for e in expected_calls if args_compared(e, self.config.tool_args.get(e.name))}
        return sorted({a.name for a in actual_calls if not a.args_captured and a.name in compared})

    def _missing_reason(
        self,
        index: int,
        expected_calls: list[ToolCall],
        actual_calls: list[ToolCall],
        match: SequenceMatch,
        compared: _Compared,
        names: tuple[list[str], list[str]],
    ) -> str:
        wanted = expected_calls[index]
        positional = why_unmatched(index, compared[0], compared[1], match, compared[2], names)
        if positional == "fewer times than expected":
            return "called fewer times than expected"
        if positional:
            return positional
        namesakes = [j for j, name in enumerate(names[1]) if name == wanted.name]
        if not namesakes:
            return "not called"
        leftover = set(match.extra)
        at_same_position = [j for j in namesakes if j == index and self.config.match_type is MatchType.EXACT]
        closest = (at_same_position or [j for j in namesakes if j in leftover] or namesakes)[0]
        rule = self.config.tool_args.get(wanted.name)
        return f"{_DIFFERENT_ARGUMENTS}: " + describe_arg_difference(actual_calls[closest], wanted, rule)


@register_criterion("node_order")
class NodeOrderMatchCriterion(SyncCriterion):
    """Compares the visited nodes with the expected node order (``match_type``)."""

    name = "node_order_score"
    description = "Graph nodes were visited in the expected order"
    reads = frozenset({"node_visits"})

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_nodes = expected.expected_node_order()
        actual_nodes = actual.node_visits
        match_type = self.config.match_type
        if expected_nodes:
            match = match_sequences(expected_nodes, actual_nodes, match_type, None, (expected_nodes, actual_nodes))
        else:  # nothing expected: every match type passes
            match = SequenceMatch(score=1.0, pairs=[], missing=[], extra=list(range(len(actual_nodes))))
        details = {
            "reason": _reason(match.score, "nodes", expected_nodes, actual_nodes),
            "match_type": match_type.value,
            "expected_node_order": expected_nodes,
            "actual_node_order": actual_nodes,
            "matches": pair_details(match, expected_nodes),
            "missing": [
                {
                    "name": expected_nodes[i],
                    "expected_index": i,
                    "reason": self._missing_reason(i, expected_nodes, actual_nodes, match),
                }
                for i in match.missing
            ],
            "extra": [{"name": actual_nodes[j], "actual_index": j} for j in match.extra],
        }
        return self._result(match.score, details)

    @staticmethod
    def _missing_reason(index: int, expected_nodes: list[str], actual_nodes: list[str], match: SequenceMatch) -> str:
        positional = why_unmatched(index, expected_nodes, actual_nodes, match, None, (expected_nodes, actual_nodes))
        if positional == "fewer times than expected":
            return "visited fewer times than expected"
        return positional or "not visited"


@register_criterion("tool_name_match")
class ToolNameMatchCriterion(SyncCriterion):
    """Multiset comparison of tool names; order and arguments are ignored, extra calls are not penalised."""

    name = "tool_name_match_score"
    description = "The expected tools were called (names only)"
    reads = frozenset({"tool_calls"})

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_names = [c.name for c in expected.expected_tools()]
        actual_names = actual.get_tool_names()
        if expected_names == actual_names or sorted(expected_names) == sorted(actual_names):  # the usual cases
            missing_names: list[str] = []
            extra_names: list[str] = []
        else:
            wanted, called = Counter(expected_names), Counter(actual_names)
            missing_names = sorted((wanted - called).elements())
            extra_names = sorted((called - wanted).elements())
        if expected_names:  # each expected name matches one call of that name, as often as both have it
            score = (len(expected_names) - len(missing_names)) / len(expected_names)
        else:  # nothing expected: full marks only if nothing was called
            score = 0.5 if actual_names else 1.0
        details = {
            "reason": _reason(score, "tool names", expected_names, actual_names),
            "expected_names": expected_names,
            "actual_names": actual_names,
            "missing_names": missing_names,
            "extra_names": extra_names,
        }
        return self._result(score, details)
