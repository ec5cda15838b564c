"""The mypyc-compiled modules (the mapper, the SDK span converter, the criteria's sequence matching and argument
comparison) give exactly what their Python source gives.

Runs where tracegrade is installed compiled (CI: ``TRACEGRADE_COMPILE=1``): one script maps the real agent runs
in tests/data/otlp, converts SDK spans and grades generated trajectories (every match type, argument rules,
swapped, missing, extra and uncaptured calls), once on the installed package and once on a copy of its Python
source without the extensions; both outputs must be equal. (The C twin of the tool-call comparison has its own test:
tests/test_call_compare.py.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tracegrade
import tracegrade.capture.sdk_convert as sdk_convert
from tracegrade.trajectory import COMPILED

DATA = Path(__file__).parent / "data" / "otlp"
_SCRIPT = """
import dataclasses, json, sys
from pathlib import Path
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator
from opentelemetry.trace import Link, Status, StatusCode
import random
import tracegrade.capture.sdk_convert as sdk_convert
import tracegrade.criteria.sequence_match as sequence_match
from tracegrade.capture.sdk_convert import span_from_readable
from tracegrade.criteria import NodeOrderMatchCriterion, ToolNameMatchCriterion, TrajectoryMatchCriterion
from tracegrade.models import CriterionConfig, EvalCase, ExecutionResult, MatchType, ToolArgsRule, ToolCall
from tracegrade.ingest.decode import decode_traces_json
from tracegrade.trajectory import COMPILED, map_spans

class Counting(IdGenerator):
    def __init__(self):
        self.n = 0
    def generate_span_id(self):
        self.n += 1
        return self.n
    def generate_trace_id(self):
        self.n += 1
        return self.n << 64

out = {"compiled": [COMPILED, sdk_convert.__file__.endswith(".so"), sequence_match.__file__.endswith(".so")],
       "mapped": {}}
for path in sorted(Path(sys.argv[1]).glob("*.otlp.json")):
    out["mapped"][path.name] = map_spans(decode_traces_json(path.read_bytes()).spans).model_dump(mode="json")
exporter = InMemorySpanExporter()
provider = TracerProvider(resource=Resource({"service.name": "agent"}), id_generator=Counting())
provider.add_span_processor(SimpleSpanProcessor(exporter))
tracer = provider.get_tracer("compiled-check", "1.0")
with tracer.start_as_current_span("invoke_agent", start_time=10, end_on_exit=False) as root:
    with tracer.start_as_current_span("chat", attributes={"gen_ai.usage.input_tokens": 3, "tags": ("a", "b")},
                                      start_time=20, end_on_exit=False) as chat:
        chat.add_event("gen_ai.choice", {"index": 0}, timestamp=25)
        chat.set_status(Status(StatusCode.ERROR, "bad"))
        chat.end(end_time=30)
    with tracer.start_as_current_span("execute_tool", links=[Link(root.get_span_context(), {"why": "x"})],
                                      start_time=40, end_on_exit=False) as tool:
        tool.end(end_time=50)
    root.end(end_time=60)
out["converted"] = [dataclasses.asdict(span_from_readable(s)) for s in exporter.get_finished_spans()]

rng = random.Random(7)
rules = {"book": ToolArgsRule(mode="subset"), "mail": ToolArgsRule(mode="keys", keys=["to"]),
         "log": ToolArgsRule(mode="ignore")}
def call(name):
    args = {"to": rng.choice("ab"), "n": rng.choice([1, 1.0, 2]), "deep": {"tags": rng.sample("xyz", 2)}}
    return ToolCall(name=name, args=args)
def varied(calls):
    calls = [c.model_copy(deep=True) for c in calls]
    for _ in range(rng.randrange(4)):
        change, at = rng.randrange(6), rng.randrange(len(calls))
        if change == 0 and len(calls) > 1:
            calls[at], calls[-1] = calls[-1], calls[at]
        elif change == 1:
            del calls[at]
        elif change == 2:
            calls.insert(at, call(rng.choice(["book", "mail", "log", "find"])))
        elif change == 3 and calls[at].args:
            calls[at].args["deep"]["tags"].append("w")
        elif change == 4:
            calls[at].args.pop("to", None)
        else:
            calls[at] = calls[at].model_copy(update={"args": {}, "args_captured": False})
        if not calls:
            break
    return calls
criteria = [TrajectoryMatchCriterion(CriterionConfig.trajectory(match_type=m, check_args=a, tool_args=rules))
            for m in MatchType for a in (True, False)]
criteria += [NodeOrderMatchCriterion(CriterionConfig.node_order(match_type=m)) for m in MatchType]
criteria.append(ToolNameMatchCriterion(CriterionConfig.tool_name_match()))
graded = out["graded"] = []
for index in range(300):
    expected = [call(rng.choice(["book", "mail", "log", "find"])) for _ in range(rng.randrange(1, 8))]
    nodes = [rng.choice("pqrs") for _ in range(rng.randrange(0, 6))]
    actual_nodes = [n for n in nodes if rng.random() < 0.8] + rng.choices("pqrs", k=rng.randrange(2))
    case = EvalCase.single_turn(f"c{index}", "q", expected_tools=expected, expected_node_order=nodes)
    execution = ExecutionResult(tool_calls=varied(expected), node_visits=actual_nodes)
    graded.append([c.evaluate_sync(execution, case).model_dump(mode="json") for c in criteria])
print(json.dumps(out, sort_keys=True, default=str))
"""


def _run(pythonpath: str | None) -> dict:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(DATA)], env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.skipif(
    not (COMPILED and sdk_convert.__file__.endswith(".so")),
    reason="tracegrade is installed without its compiled modules",
)
def test_compiled_modules_give_what_their_python_source_gives(tmp_path: Path) -> None:
    package = Path(tracegrade.__file__).parent
    shutil.copytree(package, tmp_path / "tracegrade", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    compiled, pure = _run(None), _run(str(tmp_path))
    assert compiled.pop("compiled") == [True, True, True]
    assert pure.pop("compiled") == [False, False, False]
    assert len(compiled["mapped"]) == 5 and len(compiled["converted"]) == 3 and len(compiled["graded"]) == 300
    scores = {result["score"] for results in compiled["graded"] for result in results}
    assert 0.0 in scores and 1.0 in scores and len(scores) > 5  # full, none and partial credit all graded
    assert compiled == pure
