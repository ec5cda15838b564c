"""Eval reports built in code for the reporter tests: every outcome, hostile text and odd field content; and a
reader of the cases an HTML report packs."""

from __future__ import annotations

import base64
import gzip
import re

from tests.support.plugin_sessions import strict_json_text
from tracegrade.models.dataset import ToolCall, TrajectoryStep
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, TokenUsage

SCRIPT = "<script>alert(1)</script>"
QUOTES = "\"double\" 'single' &amp; `back`"
CDATA_END = "]]>"
CONTROL = "".join(chr(c) for c in range(0x20) if c not in (0x09, 0x0A, 0x0D))  # raw C0 controls
EMOJI = "🚀 naïve café 漢字"
LONG = "long-" * 20_000  # 100,000 characters
HOSTILE = f"{SCRIPT} {QUOTES} {CDATA_END} {CONTROL} {EMOJI}"
NO_PROVIDER = "No LLM provider available"
JUDGE_USAGE = TokenUsage(input_tokens=1200, output_tokens=300, cost_usd=0.0123, calls=3)
AGENT_USAGE = TokenUsage(input_tokens=5000, output_tokens=700, calls=4)


def passing_case() -> EvalCaseResult:
    return EvalCaseResult.success(
        "case-pass",
        [
            CriterionResult.success("tool_trajectory_avg_score", 1.0, 1.0, {"reason": "Matched 100%"}),
            CriterionResult.success("response_match_score", 0.91, 0.8, {"reason": "close"}, JUDGE_USAGE),
        ],
        name="Paris weather",
        actual_response="It is sunny in Paris.",
        actual_tool_calls=[ToolCall(name="get_weather", args={"location": "Paris"}, call_id="c1", result={"t": 21})],
        actual_trajectory=[
            TrajectoryStep.node("MAIN"),
            TrajectoryStep.tool("get_weather", args={"location": "Paris"}),
            TrajectoryStep(step_type="conditional", name="MAIN->END"),
        ],
        node_visits=["MAIN", "TOOL", "MAIN"],
        duration_seconds=1.25,
        agent_token_usage=AGENT_USAGE,
    )


def failing_case() -> EvalCaseResult:
    trajectory = CriterionResult.success(
        "tool_trajectory_avg_score",
        0.5,
        1.0,
        {
            "reason": f"Matched 50% {HOSTILE}",
            "matches": [{"expected_index": 0, "actual_index": 0, "name": "search"}],
            "missing": [{"name": "book_flight", "args": {"to": SCRIPT}, "expected_index": 1, "reason": "never called"}],
            "extra": [{"name": f"evil{SCRIPT}", "args": {}, "actual_index": 1}],
            "match_type": "in_order",
        },
    )
    return EvalCaseResult.success(
        "case-fail",
        [trajectory, CriterionResult.success("contains_keywords", 1.0, 1.0, {"found": ["x"]})],
        name=f"Hostile {HOSTILE}",
        actual_response=f"{HOSTILE}\n{LONG}",
        actual_tool_calls=[
            ToolCall(name="search", args={"q": SCRIPT, "nested": {"k": [1, 2, CONTROL]}}, result=f"{CDATA_END}{LONG}"),
        ],
        actual_trajectory=[TrajectoryStep.node(f"NODE{SCRIPT}"), TrajectoryStep.tool("search", args={"q": SCRIPT})],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": f"hi {SCRIPT}"}, {"type": "image", "url": "x"}]},
            {"role": "assistant", "content": HOSTILE},
        ],
        node_visits=[f"NODE{SCRIPT}", "TOOL"],
        turn_results=[{"turn_index": 0, "user_input": SCRIPT, "agent_response": QUOTES, "tool_calls": []}],
        duration_seconds=2.5,
        metadata={"note": HOSTILE},
    )


def error_case() -> EvalCaseResult:
    return EvalCaseResult.failure(
        "case-error", f"RuntimeError: agent crashed {HOSTILE}", name="Crashing case", duration_seconds=0.5
    )


def skipped_case() -> EvalCaseResult:
    skipped = CriterionResult(
        criterion="response_match_score",
        score=0.0,
        passed=True,
        threshold=0.8,
        skipped=True,
        details={"reason": "no expected response"},
    )
    return EvalCaseResult.success("case-skipped", [skipped], name="Skipped only", duration_seconds=0.1)


def warning_case() -> EvalCaseResult:
    judge = CriterionResult.success(
        "final_response_match_v2", 0.5, 0.5, {"reason": NO_PROVIDER}, TokenUsage(input_tokens=0, cost_usd=0.0)
    )
    judge.warnings = [NO_PROVIDER]
    return EvalCaseResult.success("case-warn", [judge], name="Judge without provider", duration_seconds=0.2)


def sample_report() -> EvalReport:
    """Five cases: pass, fail, error, all-skipped and a warning placeholder judge."""
    return EvalReport.create(
        "capitals/v1 <set>",
        [passing_case(), failing_case(), error_case(), skipped_case(), warning_case()],
        eval_set_name=f"Capitals {SCRIPT}",
        config_used={"criteria": {"trajectory": {"threshold": 1.0}}},
        metadata={"run": QUOTES},
    )


def odd_report() -> EvalReport:
    """A report whose case fields hold content the models do not re-validate on assignment."""
    case = passing_case()
    case.actual_trajectory = ["plain-step", {"step_type": "tool", "name": "t", "args": {"a": 1}}]  # type: ignore[list-item]
    case.actual_tool_calls = ["bare_tool_name", {"name": "d", "args": {"x": object()}, "result": object()}]  # type: ignore[list-item]
    case.messages = [{"role": "user", "content": [{"text": "part one"}, {"text": "part two"}]}, "loose message"]  # type: ignore[list-item]
    case.turn_results = ["not a dict", {"turn": 1, "user": "u", "agent": "a"}]  # type: ignore[list-item]
    case.node_responses = [{"node_name": "MAIN", "response_text": "r", "is_final": True}]
    case.node_visits = ["A", "B"]
    return EvalReport.create("odd", [case])


def packed_cases(page: str) -> list[list[object]]:
    """The cases an HTML page packs in its ``data-cases`` attribute, read as the page's ``JSON.parse`` reads them
    (NaN or Infinity refused)."""
    packed = re.search(r'data-cases="([A-Za-z0-9+/=]+)"', page)
    assert packed is not None, "the page packs no cases"
    cases: list[list[object]] = strict_json_text(gzip.decompress(base64.b64decode(packed.group(1))).decode("utf-8"))
    return cases
