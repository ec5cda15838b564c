"""A tool schema captured in a trace is untrusted: its ``$ref`` is resolved inside the schema only (never fetched
from a URL or file), a reference that does not resolve or loops fails the call it applies to, saying so, instead
of raising out of the criterion, and a pattern that backtracks without end fails the call instead of hanging."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tracegrade.criteria import ToolSchemaCriterion
from tracegrade.criteria.tool_schema import CALL_PATTERN_TIMEOUT
from tracegrade.models import EvalCase, ExecutionResult, ToolCall
from tracegrade.models.config import ToolSchemaConfig
from tracegrade.models.span import SpanRecord
from tracegrade.trajectory import map_spans

CASE = EvalCase(eval_id="case", conversation=[])
# what the server below would hand out: under it, {"city": 1} would be valid
PERMISSIVE = {"type": "object"}


@pytest.fixture
def schema_server() -> Iterator[tuple[str, list[str]]]:
    """A real HTTP server on loopback that serves a JSON Schema and records every path asked for."""
    asked: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            body = json.dumps(PERMISSIVE).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _captured(parameters: dict) -> ExecutionResult:
    """An execution whose ``weather`` definition was mapped from an OTel GenAI LLM span, and one call of it."""
    definitions = json.dumps([{"type": "function", "function": {"name": "weather", "parameters": parameters}}])
    spans = [
        SpanRecord(trace_id="1" * 32, span_id="a" * 16, name="agent", start_ns=1, end_ns=10, attributes={}),
        SpanRecord(
            trace_id="1" * 32,
            span_id="b" * 16,
            name="chat",
            start_ns=2,
            end_ns=5,
            parent_span_id="a" * 16,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.tool.definitions": definitions,
            },
        ),
    ]
    (definition,) = map_spans(spans).tool_definitions
    call = ToolCall(name="weather", args={"city": 1}, call_id="c1")
    return ExecutionResult(tool_calls=[call], tool_definitions=[definition])


def _grade(execution: ExecutionResult) -> object:
    return ToolSchemaCriterion(ToolSchemaConfig()).evaluate_sync(execution, CASE)


def test_a_ref_to_a_url_in_a_captured_schema_is_never_fetched(schema_server: tuple[str, list[str]]) -> None:
    url, asked = schema_server
    result = _grade(_captured({"$ref": f"{url}/weather.json"}))
    assert asked == []  # the grader opened no address the trace named
    assert not result.passed and result.score == 0.0
    (violation,) = result.details["violations"]
    assert violation["path"] == "$"
    assert f"{url}/weather.json" in violation["rule"] and "never fetched" in violation["rule"]
    assert "$defs" in violation["rule"]  # how to fix it


def test_a_ref_to_a_file_is_never_read(tmp_path: Path) -> None:
    schema_file = tmp_path / "weather.json"
    schema_file.write_text(json.dumps(PERMISSIVE))
    result = _grade(_captured({"$ref": schema_file.as_uri()}))
    assert not result.passed  # under the file's schema it would have passed
    (violation,) = result.details["violations"]
    assert schema_file.as_uri() in violation["rule"] and "never fetched" in violation["rule"]


@pytest.mark.parametrize(
    ("parameters", "says"),
    [
        ({"$ref": "#"}, "loop without end"),
        ({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "loop without end"),
        ({"$ref": "#/$defs/missing"}, "'#/$defs/missing' does not resolve within the schema"),
    ],
)
def test_a_ref_that_loops_or_points_nowhere_fails_the_call_and_says_why(parameters: dict, says: str) -> None:
    result = _grade(_captured(parameters))
    assert not result.passed and result.error is None
    (violation,) = result.details["violations"]
    assert violation["call"] == "call 0 'weather' (c1)" and says in violation["rule"]
    assert says in result.details["reason"]


def test_references_inside_the_schema_still_resolve_and_recursive_schemas_still_validate() -> None:
    tree = {
        "$defs": {"node": {"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}},
        "$ref": "#/$defs/node",
        "properties": {"city": {"type": "string"}},
    }
    result = _grade(_captured(tree))
    (violation,) = result.details["violations"]
    assert violation["path"] == "$.city" and violation["rule"].startswith("type:")


GRADER = textwrap.dedent(
    """
    import json, sys
    from tracegrade.criteria import ToolSchemaCriterion
    from tracegrade.models import EvalCase, ExecutionResult, ToolCall
    from tracegrade.models.config import ToolSchemaConfig
    from tracegrade.models.execution import ToolDefinition
    evil = {"type": "object", "properties": {"city": {"type": "string", "pattern": "^(a|aa)+$"}},
            "patternProperties": {"^(b|bb)+$": {"type": "string"}}}
    calls = [ToolCall(name="weather", args={"city": "a" * 100 + "!"}, call_id="c1"),
             ToolCall(name="weather", args={"b" * 100 + "!": "x"}, call_id="c2"),
             ToolCall(name="weather", args={"city": "aaaa"}, call_id="c3")]
    execution = ExecutionResult(tool_calls=calls, tool_definitions=[ToolDefinition(name="weather", parameters=evil)])
    result = ToolSchemaCriterion(ToolSchemaConfig()).evaluate_sync(execution, EvalCase(eval_id="c", conversation=[]))
    print(json.dumps({"score": result.score, "details": result.details}))
    """
)


def test_a_captured_pattern_that_backtracks_without_end_fails_the_call_instead_of_hanging(tmp_path: Path) -> None:
    script = tmp_path / "grader.py"
    script.write_text(GRADER)
    # a process of its own, killed if it hangs: Python's re cannot be stopped from within (the old code's state)
    process = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    graded = json.loads(process.stdout)
    assert graded["score"] == pytest.approx(1 / 3)  # c3 matches: the pattern works where it does not backtrack
    first, second = graded["details"]["violations"]
    assert (first["call"], first["path"]) == ("call 0 'weather' (c1)", "$.city")
    assert "'^(a|aa)+$' took more than 1 s to match" in first["rule"] and "simplify the pattern" in first["rule"]
    assert (second["call"], second["path"]) == ("call 1 'weather' (c2)", f"$.{'b' * 100}!")
    assert "'^(b|bb)+$' took more than 1 s" in second["rule"]
    assert graded["details"]["valid_calls"] == ["call 2 'weather' (c3)"]


KEYWORDS_GRADER = textwrap.dedent(
    """
    import json
    from tracegrade.criteria import ToolSchemaCriterion
    from tracegrade.models import EvalCase, ExecutionResult, ToolCall
    from tracegrade.models.config import ToolSchemaConfig
    from tracegrade.models.execution import ToolDefinition
    schemas = {
        "closed": {"type": "object", "patternProperties": {"^(a|aa)+$": {}}, "additionalProperties": False},
        "typed": {"type": "object", "patternProperties": {"^x-": {}}, "additionalProperties": {"type": "integer"}},
        "unevaluated": {"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object",
                        "patternProperties": {"^x-": {}}, "unevaluatedProperties": False},
        "braced": {"type": "object", "properties": {"city": {"type": "string", "pattern": "^(a|aa)+${i"}}},
    }
    calls = [ToolCall(name="closed", args={"a" * 100 + "!": 1}, call_id="c1"),
             ToolCall(name="typed", args={"x-1": "s", "other": "s"}, call_id="c2"),
             ToolCall(name="unevaluated", args={"y": 1}, call_id="c3"),
             ToolCall(name="braced", args={"city": "a" * 100 + "!"}, call_id="c4"),
             ToolCall(name="typed", args={"x-1": "s", "other": 1}, call_id="c5")]
    definitions = [ToolDefinition(name=name, parameters=schema) for name, schema in schemas.items()]
    execution = ExecutionResult(tool_calls=calls, tool_definitions=definitions)
    result = ToolSchemaCriterion(ToolSchemaConfig()).evaluate_sync(execution, EvalCase(eval_id="c", conversation=[]))
    print(json.dumps(result.details))
    """
)


def test_patterns_are_matched_within_the_time_limit_wherever_jsonschema_reads_them(tmp_path: Path) -> None:
    # jsonschema's additionalProperties and unevaluatedProperties match patternProperties with re, without a limit,
    # and a pattern the regex module cannot read went to re as well: each of these hung the grader
    script = tmp_path / "grader.py"
    script.write_text(KEYWORDS_GRADER)
    process = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    details = json.loads(process.stdout)
    rules = {(v["call"].split()[1], v["path"]): v["rule"] for v in details["violations"]}
    assert set(rules) == {("0", f"$.{'a' * 100}!"), ("1", "$.other"), ("2", "$"), ("3", "$.city")}
    assert "'^(a|aa)+$' took more than 1 s" in rules["0", f"$.{'a' * 100}!"]  # and not also an additional property
    assert rules["1", "$.other"] == "type: 's' is not of type 'integer'"  # additional ones still checked
    assert "unevaluatedProperties is not checked in a schema with patternProperties" in rules["2", "$"]
    assert "'^(a|aa)+${i' cannot be matched with a time limit" in rules["3", "$.city"]
    assert "escape a literal brace" in rules["3", "$.city"]
    assert details["valid_calls"] == ["call 4 'typed' (c5)"]


MANY_KEYS_GRADER = textwrap.dedent(
    """
    import json
    from tracegrade.criteria import ToolSchemaCriterion
    from tracegrade.models import EvalCase, ExecutionResult, ToolCall
    from tracegrade.models.config import ToolSchemaConfig
    from tracegrade.models.execution import ToolDefinition
    schema = {"type": "object", "patternProperties": {"^(a|aa)+$": {}}, "additionalProperties": False}
    keys = {"a" * (100 + n) + "!": n for n in range(12)}  # each backtracks in the pattern without end
    execution = ExecutionResult(tool_calls=[ToolCall(name="closed", args=keys, call_id="c1")],
                                tool_definitions=[ToolDefinition(name="closed", parameters=schema)])
    result = ToolSchemaCriterion(ToolSchemaConfig()).evaluate_sync(execution, EvalCase(eval_id="c", conversation=[]))
    print(json.dumps(result.details))
    """
)


def test_a_calls_pattern_matches_are_given_up_together_past_the_calls_time_limit(tmp_path: Path) -> None:
    # one second per argument (or more, under load) added up: 12 arguments against a catastrophic captured pattern
    # held the grader 12 s and more for one call; past CALL_PATTERN_TIMEOUT the rest are not matched at all
    script = tmp_path / "grader.py"
    script.write_text(MANY_KEYS_GRADER)
    process = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert process.returncode == 0, process.stderr
    rules = [violation["rule"] for violation in json.loads(process.stdout)["violations"]]
    assert len(rules) == 12, rules  # every argument is reported, none passes unchecked
    given_up = [rule for rule in rules if f"took more than {CALL_PATTERN_TIMEOUT:g} s together" in rule]
    assert given_up and all("simplify the pattern" in rule for rule in given_up), rules
