"""Tool arguments against their schemas: definitions captured by the mapper (GenAI, OpenInference,
pydantic-ai) or given in the config, the same verdicts live and offline, "no definitions" never a pass."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.capture_agents import build_support_agent, function_graph
from tests.support.live_and_stored import grade_live_and_stored, verdicts
from tracegrade.criteria import ToolSchemaCriterion
from tracegrade.criteria.registry import build_criteria
from tracegrade.models import EvalCase, EvalSet, ExecutionResult, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, EvalConfig, ToolSchemaConfig
from tracegrade.models.execution import ToolDefinition
from tracegrade.models.span import SpanRecord
from tracegrade.trajectory import map_spans

CASE = EvalCase(eval_id="case", conversation=[])
SKU_SCHEMA = {"type": "object", "properties": {"sku": {"type": "string", "pattern": "^sku-[0-9]+$"}}}
SUPPORT_SET = EvalSet(
    eval_set_id="schemas",
    eval_cases=[
        EvalCase(eval_id="two-skus", conversation=[Invocation.simple("check sku-1 and sku-2")]),
        EvalCase(eval_id="retry", conversation=[Invocation.simple("strict sku-9")]),
    ],
)
ORDER_SCHEMA = {
    "type": "object",
    "properties": {
        "sku": {"type": "string"},
        "quantity": {"type": "integer", "minimum": 1},
        "address": {"type": "object", "properties": {"zip": {"type": "string"}}, "required": ["zip"]},
    },
    "required": ["sku", "quantity"],
    "additionalProperties": False,
}


def _grade(calls: list[ToolCall], definitions: list[ToolDefinition], **settings) -> object:
    execution = ExecutionResult(tool_calls=calls, tool_definitions=definitions)
    return ToolSchemaCriterion(ToolSchemaConfig(**settings)).evaluate_sync(execution, CASE)


def test_live_and_offline_give_the_same_verdicts_from_captured_and_configured_schemas(tmp_path: Path) -> None:
    # lookup's schema from the config (a stricter sku pattern); strict_lookup's from pydantic-ai's definitions
    config = EvalConfig(criteria=CriteriaConfig(tool_schema=ToolSchemaConfig(schemas={"lookup": SKU_SCHEMA})))
    live, offline = grade_live_and_stored(build_support_agent(), SUPPORT_SET, config, tmp_path / "store.duckdb")
    assert verdicts(live, "violations", "valid_calls") == verdicts(offline, "violations", "valid_calls")
    two, retry = (r.criterion_results[0] for r in live.results)
    assert two.passed and two.score == 1.0 and len(two.details["valid_calls"]) == 2
    assert not retry.passed and retry.score == 0.5  # strict_lookup valid, lookup("fallback") not
    (broken,) = retry.details["violations"]
    assert (broken["path"], broken["source"]) == ("$.sku", "config") and broken["rule"].startswith("pattern:")
    assert "'lookup'" in retry.details["reason"] and "$.sku" in retry.details["reason"]
    assert any("'strict_lookup'" in label for label in retry.details["valid_calls"])


def test_no_definitions_captured_is_its_own_state_live_and_offline(tmp_path: Path) -> None:
    config = EvalConfig(criteria=CriteriaConfig(tool_schema=ToolSchemaConfig()))
    cases = EvalSet(
        eval_set_id="none", eval_cases=[EvalCase(eval_id="add", conversation=[Invocation.simple("add 1 and 2")])]
    )
    live, offline = grade_live_and_stored(function_graph, cases, config, tmp_path / "store.duckdb")
    assert verdicts(live, "state") == verdicts(offline, "state")
    (result,) = live.results[0].criterion_results
    assert not result.passed and result.details["state"] == "no_definitions"
    assert "no tool definitions were captured" in result.error


def test_the_reason_names_the_call_the_argument_path_and_the_rule() -> None:
    calls = [
        ToolCall(name="order", args={"sku": "a", "quantity": 2}, call_id="c1"),
        ToolCall(name="order", args={"sku": "a", "quantity": 0, "address": {}, "gift": True}, call_id="c2"),
    ]
    result = _grade(calls, [ToolDefinition(name="order", parameters=ORDER_SCHEMA)])
    assert result.score == 0.5 and not result.passed
    rules = {(v["call"], v["path"], v["rule"].split(":")[0]) for v in result.details["violations"]}
    assert rules == {
        ("call 1 'order' (c2)", "$", "additionalProperties"),
        ("call 1 'order' (c2)", "$.address", "required"),
        ("call 1 'order' (c2)", "$.quantity", "minimum"),
    }
    assert "1 of 2 checked calls broke their schema" in result.details["reason"]
    assert "call 1 'order' (c2) at $.quantity: minimum" in result.details["reason"]


def test_uncheckable_calls_are_listed_apart_and_undefined_tools_fail_unless_skipped() -> None:
    calls = [
        ToolCall(name="order", args={"sku": "a", "quantity": 1}),
        ToolCall(name="order", args={}, args_captured=False),
        ToolCall(name="ping", args={}),
        ToolCall(name="made_up", args={}),
    ]
    definitions = [ToolDefinition(name="order", parameters=ORDER_SCHEMA), ToolDefinition(name="ping")]
    strict = _grade(calls, definitions)
    assert strict.score == 0.5  # order valid, made_up undefined; the other two unchecked
    assert [u["why"] for u in strict.details["unchecked"]] == [
        "arguments not captured",
        "its definition has no parameter schema",
    ]
    assert "the model was not offered it" in strict.details["reason"]
    lenient = _grade(calls, definitions, undefined_tools="skip")
    assert lenient.score == 1.0 and lenient.passed and len(lenient.details["unchecked"]) == 3
    nothing = _grade(calls[1:3], definitions)
    assert not nothing.passed and nothing.details["state"] == "nothing_checkable"


def test_a_configured_schema_that_is_not_json_schema_is_refused() -> None:
    (criterion,) = build_criteria(CriteriaConfig(tool_schema=ToolSchemaConfig(schemas={"x": {"type": "nope"}})))
    assert "schemas['x'] is not a valid JSON Schema" in " ".join(criterion.validate_config())


def _llm_span(attributes: dict) -> list[SpanRecord]:
    root = SpanRecord(
        trace_id="1" * 32,
        span_id="a" * 16,
        name="agent",
        start_ns=1,
        end_ns=10,
        attributes={"openinference.span.kind": "AGENT"},
    )
    llm = SpanRecord(
        trace_id="1" * 32,
        span_id="b" * 16,
        name="llm",
        start_ns=2,
        end_ns=5,
        parent_span_id="a" * 16,
        attributes=attributes,
    )
    return [root, llm]


def test_the_mapper_reads_openinference_and_openai_style_genai_definitions() -> None:
    weather = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    openinference = {
        "openinference.span.kind": "LLM",
        "llm.model_name": "gpt-4o",
        "llm.tools.0.tool.json_schema": json.dumps(
            {"type": "function", "function": {"name": "weather", "description": "d", "parameters": weather}}
        ),
        "llm.tools.1.tool.json_schema": json.dumps({"name": "time", "parameters": {"type": "object"}}),
    }
    mapped = map_spans(_llm_span(openinference))
    assert [(d.name, d.description, d.parameters) for d in mapped.tool_definitions] == [
        ("weather", "d", weather),
        ("time", None, {"type": "object"}),
    ]
    # more than ten tools: listed in their indexes' order (tool 10 after tool 9), so the last of two definitions
    # of one name is the one kept
    many = {"openinference.span.kind": "LLM", "llm.model_name": "gpt-4o"}
    for index in range(12):
        name = "lookup" if index in (2, 11) else f"t{index}"
        schema = {"type": "object", "title": f"from {index}"}
        many[f"llm.tools.{index}.tool.json_schema"] = json.dumps({"name": name, "parameters": schema})
    defined = map_spans(_llm_span(many)).tool_definitions
    assert [d.name for d in defined] == ["t0", "t1", "lookup", *(f"t{i}" for i in range(3, 11))]
    assert next(d for d in defined if d.name == "lookup").parameters == {"type": "object", "title": "from 11"}
    genai = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o",
        "gen_ai.tool.definitions": json.dumps(
            [{"type": "function", "function": {"name": "weather", "parameters": weather}}]
        ),
    }
    (definition,) = map_spans(_llm_span(genai)).tool_definitions
    assert (definition.name, definition.parameters) == ("weather", weather)
