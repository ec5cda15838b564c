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
from operator import attrgetter
from typing import Any

from tracegrade.criteria.base import SyncCriterion
from tracegrade.criteria.registry import register_criterion
from tracegrade.criteria.sequence_match import SequenceMatch, match_sequences, why_unmatched
from tracegrade.criteria.tool_args import args_compared, call_satisfies, describe_arg_difference
from tracegrade.models.config import ArgMatchMode, MatchType
from tracegrade.models.dataset import EvalCase, ToolCall
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult

__all__ = ["ARGS_NOT_COMPARED", "NodeOrderMatchCriterion", "ToolNameMatchCriterion", "TrajectoryMatchCriterion"]

#: appended to the reason when expected calls list arguments that ``check_args=False`` leaves uncompared
ARGS_NOT_COMPARED = "Arguments were not compared (check_args is off); set check_args=true to compare them."

# A call only satisfies an expected call of the same name: the matcher compares arguments of namesakes only.
_tool_name = attrgetter("name")


def _reason(score: float, noun: str, expected: list[str], actual: list[str]) -> str:
    if not expected:
        return f"No {noun} expected; got {actual}."
    return f"Matched {score * 100:.0f}% of expected {noun}. Expected {expected}, got {actual}."


def _call_dict(call: ToolCall) -> dict[str, Any]:
    """A compact dump of a call for result details (cheaper than ``model_dump``, same keys)."""
    data: dict[str, Any] = {"name": call.name, "args": call.args, "call_id": call.call_id, "result": call.result}
    if not call.args_captured:
        data["args_captured"] = False
    if call.error is not None:
        data["error"] = call.error
    return data


def _call_dicts(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """``_call_dict`` of each call; the common shape is built inline (this runs for every call of every case)."""
    return [
        {"name": c.name, "args": c.args, "call_id": c.call_id, "result": c.result}
        if c.args_captured and c.error is None
        else _call_dict(c)
        for c in calls
    ]


def _match_details(match: SequenceMatch, expected_names: Sequence[str]) -> list[dict[str, Any]]:
    return [{"expected_index": i, "actual_index": j, "name": expected_names[i]} for i, j in match.pairs]


@register_criterion("trajectory", "trajectory_match")
class TrajectoryMatchCriterion(SyncCriterion):
    """Compares the recorded tool calls with the expected ones (``match_type``, ``check_args``, ``tool_args``)."""

    name = "tool_trajectory_avg_score"
    description = "Tool-call trajectory matches the expected tools (EXACT, IN_ORDER or ANY_ORDER)"

    def validate_config(self) -> list[str]:
        problems = super().validate_config()
        for tool, rule in self.config.tool_args.items():
            if rule.mode is ArgMatchMode.KEYS and not rule.keys:
                problems.append(f"tool_args[{tool!r}]: mode 'keys' needs a non-empty 'keys' list")
            if rule.keys and rule.mode is not ArgMatchMode.KEYS:
                problems.append(f"tool_args[{tool!r}]: 'keys' is only used with mode 'keys'")
        return problems

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_calls = expected.expected_tools()
        actual_calls = actual.tool_calls
        check_args = self.config.check_args
        rules = self.config.tool_args
        if check_args:
            uncaptured = self._uncaptured_tools(expected_calls, actual_calls)
            if uncaptured:
                return self._failure(
                    f"arguments not captured for {', '.join(map(repr, uncaptured))}: the trace recorded these "
                    "calls without their arguments, so check_args cannot compare them; enable tool content "
                    "capture in the instrumentation, or turn check_args off (or set tool_args "
                    "{name: {'mode': 'ignore'}}) for these tools",
                    {"uncaptured_tools": uncaptured, "check_args": True},
                )

        same: Callable[[ToolCall, ToolCall], bool] | None
        if rules:

            def same(call: ToolCall, wanted: ToolCall) -> bool:
                return call_satisfies(call, wanted, check_args, rules.get(wanted.name))

        else:  # call_satisfies without rules, minus its indirection (names are the matcher's key)
            same = ToolCall.matches if check_args else None
        match = match_sequences(expected_calls, actual_calls, self.config.match_type, same, _tool_name)
        expected_names = [c.name for c in expected_calls]
        actual_names = [c.name for c in actual_calls]
        reason = _reason(match.score, "tools", expected_names, actual_names)
        if not check_args and any(c.args for c in expected_calls):
            # check_args=False is the seed's default; say so, or an expected city=Bergen "passes" against Oslo
            reason += f" {ARGS_NOT_COMPARED}"
        details = {
            "reason": reason,
            "match_type": self.config.match_type.value,
            "check_args": check_args,
            "matches": _match_details(match, expected_names),
            "missing": [
                {
                    **_call_dict(expected_calls[i]),
                    "expected_index": i,
                    "reason": self._missing_reason(i, expected_calls, actual_calls, match, same),
                }
                for i in match.missing
            ],
            "extra": [{**_call_dict(actual_calls[j]), "actual_index": j} for j in match.extra],
            "expected_trajectory": _call_dicts(expected_calls),
            "actual_trajectory": _call_dicts(actual_calls),
        }
        return self._result(match.score, details)

    def _uncaptured_tools(self, expected_calls: list[ToolCall], actual_calls: list[ToolCall]) -> list[str]:
        """Tools whose arguments must be compared but whose recorded calls carry no captured arguments."""
        if all(a.args_captured for a in actual_calls):
            return []
        compared = {e.name for e in expected_calls if args_compared(e, self.config.tool_args.get(e.name))}
        return sorted({a.name for a in actual_calls if not a.args_captured and a.name in compared})

    def _missing_reason(
        self,
        index: int,
        expected_calls: list[ToolCall],
        actual_calls: list[ToolCall],
        match: SequenceMatch,
        same: Callable[[ToolCall, ToolCall], bool] | None,
    ) -> str:
        wanted = expected_calls[index]
        positional = why_unmatched(index, expected_calls, actual_calls, match, same, _tool_name)
        if positional == "fewer times than expected":
            return "called fewer times than expected"
        if positional:
            return positional
        namesakes = [j for j, call in enumerate(actual_calls) if call.name == wanted.name]
        if not namesakes:
            return "not called"
        leftover = set(match.extra)
        at_same_position = [j for j in namesakes if j == index and self.config.match_type is MatchType.EXACT]
        closest = (at_same_position or [j for j in namesakes if j in leftover] or namesakes)[0]
        rule = self.config.tool_args.get(wanted.name)
        return "called with different arguments: " + describe_arg_difference(actual_calls[closest], wanted, rule)


@register_criterion("node_order")
class NodeOrderMatchCriterion(SyncCriterion):
    """Compares the visited nodes with the expected node order (``match_type``)."""

    name = "node_order_score"
    description = "Graph nodes were visited in the expected order"

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_nodes = expected.expected_node_order()
        actual_nodes = actual.node_visits
        match_type = self.config.match_type
        if expected_nodes:
            match = match_sequences(expected_nodes, actual_nodes, match_type, None, str)
        else:  # nothing expected: every match type passes
            match = SequenceMatch(score=1.0, pairs=[], missing=[], extra=list(range(len(actual_nodes))))
        details = {
            "reason": _reason(match.score, "nodes", expected_nodes, actual_nodes),
            "match_type": match_type.value,
            "expected_node_order": expected_nodes,
            "actual_node_order": actual_nodes,
            "matches": _match_details(match, expected_nodes),
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
        positional = why_unmatched(index, expected_nodes, actual_nodes, match, None, str)
        if positional == "fewer times than expected":
            return "visited fewer times than expected"
        return positional or "not visited"


@register_criterion("tool_name_match")
class ToolNameMatchCriterion(SyncCriterion):
    """Multiset comparison of tool names; order and arguments are ignored, extra calls are not penalised."""

    name = "tool_name_match_score"
    description = "The expected tools were called (names only)"

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        expected_names = [c.name for c in expected.expected_tools()]
        actual_names = actual.get_tool_names()
        wanted, called = Counter(expected_names), Counter(actual_names)
        if expected_names:
            matched = sum(min(n, called[name]) for name, n in wanted.items())
            score = matched / len(expected_names)
        else:  # nothing expected: full marks only if nothing was called
            score = 0.5 if actual_names else 1.0
        details = {
            "reason": _reason(score, "tool names", expected_names, actual_names),
            "expected_names": expected_names,
            "actual_names": actual_names,
            "missing_names": sorted((wanted - called).elements()),
            "extra_names": sorted((called - wanted).elements()),
        }
        return self._result(score, details)
