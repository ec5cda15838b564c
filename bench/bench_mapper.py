"""Mapper throughput: spans per second turned into ExecutionResults (run by hand).

Generates realistic agent traces as SpanRecords, half in the OTel GenAI form (pydantic-ai style: an
``invoke_agent`` root, ``chat`` spans with ~2 KB ``gen_ai.input.messages`` history, ``execute_tool``
spans) and half in the OpenInference LangGraph form (graph root, node spans with ``metadata``, model
spans with flattened ``llm.input_messages.*`` history, routing and tool spans), ``--spans`` spans per
trace on average, and reports the median of ``--repeat`` runs of ``map_spans`` over every trace, by
wall-clock time and by the process's CPU time (the fairer figure on a shared machine).

    python bench/bench_mapper.py [--traces 400] [--spans 30] [--repeat 5] [--profile [--sort tottime]]
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import random
import statistics
import time

from tracegrade.models.span import SpanRecord
from tracegrade.trajectory import COMPILED, map_spans

_WORDS = ("find", "the", "cheapest", "flight", "to", "lisbon", "book", "a", "window", "seat", "email", "itinerary")


class _Trace:
    def __init__(self, rng: random.Random, trace_no: int) -> None:
        self.rng = rng
        self.trace_id = f"{trace_no:032x}"
        self.spans: list[SpanRecord] = []
        self.clock = 1_700_000_000_000_000_000 + trace_no * 10**9

    def text(self, size: int) -> str:
        words: list[str] = []
        while sum(len(w) + 1 for w in words) < size:
            words.append(self.rng.choice(_WORDS))
        return " ".join(words)

    def span(self, name: str, parent: SpanRecord | None, attrs: dict, kind: str = "INTERNAL") -> SpanRecord:
        self.clock += self.rng.randint(100_000, 2_000_000)
        record = SpanRecord(
            trace_id=self.trace_id,
            span_id=f"{len(self.spans) + 1:016x}",
            name=name,
            start_ns=self.clock,
            end_ns=self.clock + 1,
            parent_span_id=parent.span_id if parent else None,
            kind=kind,
            attributes=attrs,
            status_code="OK",
        )
        self.spans.append(record)
        return record

    def close(self, record: SpanRecord) -> None:
        self.clock += 50_000
        record.end_ns = self.clock


def _genai_trace(trace: _Trace, rounds: int) -> list[SpanRecord]:
    """invoke_agent -> (chat, execute_tool, execute_tool) * rounds -> chat."""
    common = {"gen_ai.agent.name": "travel_agent", "gen_ai.conversation.id": "conv-1", "gen_ai.provider.name": "openai"}
    root = trace.span("invoke_agent travel_agent", None, {"gen_ai.operation.name": "invoke_agent", **common})
    history = [{"role": "user", "parts": [{"type": "text", "content": trace.text(400)}]}]
    system = json.dumps([{"type": "text", "content": trace.text(300)}])
    for i in range(rounds + 1):
        last = i == rounds
        calls = [] if last else [(f"call_{i}_{k}", f"tool_{k}", {"q": trace.text(40), "n": k}) for k in range(2)]
        parts = (
            [{"type": "text", "content": trace.text(300)}]
            if last
            else [{"type": "tool_call", "id": c, "name": n, "arguments": a} for c, n, a in calls]
        )
        output = [{"role": "assistant", "parts": parts, "finish_reason": "stop" if last else "tool_call"}]
        chat = trace.span(
            "chat gpt-4o",
            root,
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o",
                "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.system_instructions": system,
                "gen_ai.input.messages": json.dumps(history[-6:]),
                "gen_ai.output.messages": json.dumps(output),
                "gen_ai.usage.input_tokens": 500 + i,
                "gen_ai.usage.output_tokens": 40,
                **common,
            },
            kind="CLIENT",
        )
        trace.close(chat)
        history += output
        for call_id, name, args in calls:
            result = trace.text(120)
            tool = trace.span(
                f"execute_tool {name}",
                root,
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": name,
                    "gen_ai.tool.call.id": call_id,
                    "gen_ai.tool.call.arguments": json.dumps(args),
                    "gen_ai.tool.call.result": result,
                    **common,
                },
            )
            trace.close(tool)
            history.append(
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": call_id, "response": result}]}
            )
    trace.close(root)
    return trace.spans


def _flat_messages(prefix: str, messages: list[dict]) -> dict:
    attrs: dict = {}
    for i, message in enumerate(messages):
        attrs[f"{prefix}.{i}.message.role"] = message["role"]
        if message.get("content"):
            attrs[f"{prefix}.{i}.message.content"] = message["content"]
        for k, call in enumerate(message.get("tool_calls", ())):
            base = f"{prefix}.{i}.message.tool_calls.{k}.tool_call"
            attrs[f"{base}.id"] = call["id"]
            attrs[f"{base}.function.name"] = call["name"]
            attrs[f"{base}.function.arguments"] = json.dumps(call["args"])
    return attrs


def _langgraph_trace(trace: _Trace, rounds: int) -> list[SpanRecord]:
    """graph -> (agent[LLM, tools_condition], tools[tool]) * rounds -> agent -> summarize."""
    root = trace.span(
        "travel_graph",
        None,
        {
            "openinference.span.kind": "CHAIN",
            "session.id": "thread-1",
            "input.value": json.dumps({"messages": [{"type": "human", "data": {"content": "hi"}}]}),
        },
    )
    history = [{"role": "system", "content": trace.text(300)}, {"role": "user", "content": trace.text(400)}]
    step = 0

    def node(name: str) -> tuple[SpanRecord, dict]:
        nonlocal step
        step += 1
        meta = {
            "thread_id": "thread-1",
            "langgraph_step": step,
            "langgraph_node": name,
            "langgraph_triggers": [f"branch:to:{name}"],
            "langgraph_checkpoint_ns": f"{name}:{step:08d}",
        }
        attrs = {"openinference.span.kind": "CHAIN", "metadata": json.dumps(meta), "session.id": "thread-1"}
        return trace.span(name, root, attrs), attrs

    for i in range(rounds + 1):
        last = i == rounds
        agent, agent_attrs = node("agent")
        calls = (
            []
            if last
            else [{"id": f"call_{i}_{k}", "name": f"tool_{k}", "args": {"q": trace.text(40)}} for k in range(2)]
        )
        reply = {"role": "assistant", "content": trace.text(300) if last else "", "tool_calls": calls}
        llm = trace.span(
            "ChatOpenAI",
            agent,
            {
                **agent_attrs,
                "openinference.span.kind": "LLM",
                "llm.model_name": "gpt-4o",
                "llm.token_count.prompt": 500,
                "llm.token_count.completion": 40,
                **_flat_messages("llm.input_messages", history[-6:]),
                **_flat_messages("llm.output_messages", [reply]),
            },
        )
        trace.close(llm)
        route = trace.span("tools_condition", agent, {**agent_attrs, "output.value": "__end__" if last else "tools"})
        trace.close(route)
        trace.close(agent)
        history.append(reply)
        if last:
            break
        tools, tools_attrs = node("tools")
        for call in calls:
            result = trace.text(120)
            tool_message = {
                "type": "tool",
                "data": {"content": result, "tool_call_id": call["id"], "name": call["name"]},
            }
            tool = trace.span(
                call["name"],
                tools,
                {
                    **tools_attrs,
                    "openinference.span.kind": "TOOL",
                    "tool.name": call["name"],
                    "input.value": json.dumps(call["args"]),
                    "output.value": json.dumps(tool_message),
                },
            )
            trace.close(tool)
            history.append({"role": "tool", "content": result})
        trace.close(tools)
    summary, _ = node("summarize")
    trace.close(summary)
    root.attributes["output.value"] = json.dumps(
        {"messages": [{"type": "ai", "data": {"content": history[-1]["content"]}}]}
    )
    trace.close(root)
    return trace.spans


def build_traces(count: int, spans_per_trace: int, seed: int = 7) -> list[list[SpanRecord]]:
    rng = random.Random(seed)
    traces = []
    for n in range(count):
        # genai: 1 + 3 per round + 1 spans; langgraph: 1 + 7 per round + 4 spans
        if n % 2 == 0:
            traces.append(_genai_trace(_Trace(rng, n), max(1, (spans_per_trace - 2) // 3)))
        else:
            traces.append(_langgraph_trace(_Trace(rng, n), max(1, (spans_per_trace - 5) // 7)))
    return traces


def run_once(traces: list[list[SpanRecord]]) -> tuple[float, float]:
    """Map every trace once; returns (wall seconds, CPU seconds of this process)."""
    wall, cpu = time.perf_counter(), time.process_time()
    for spans in traces:
        map_spans(spans)
    return time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=400)
    parser.add_argument("--spans", type=int, default=30, help="average spans per trace")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="print the top of a cProfile of one run")
    parser.add_argument(
        "--sort", default="cumulative", choices=("cumulative", "tottime", "ncalls"), help="order of --profile"
    )
    options = parser.parse_args()

    traces = build_traces(options.traces, options.spans)
    total = sum(len(t) for t in traces)
    attr_bytes = sum(len(v) for t in traces for s in t for v in s.attributes.values() if isinstance(v, str))
    print(
        f"{len(traces)} traces, {total} spans ({total / len(traces):.1f} per trace), "
        f"{attr_bytes / total / 1024:.2f} KiB of string attributes per span; "
        f"mapper {'compiled (mypyc)' if COMPILED else 'pure Python'}"
    )
    run_once(traces[:20])  # warm-up
    if options.profile:
        profiler = cProfile.Profile()
        profiler.runcall(run_once, traces)
        pstats.Stats(profiler).sort_stats(options.sort).print_stats(25)
    runs = [run_once(traces) for _ in range(options.repeat)]
    for label, times in (("wall", [w for w, _ in runs]), ("cpu", [c for _, c in runs])):
        median = statistics.median(times)
        print(
            f"map_spans ({label} time): median {total / median:,.0f} spans/s, "
            f"{median / len(traces) * 1e6:,.0f} µs per trace (runs: {', '.join(f'{total / t:,.0f}' for t in times)})"
        )


if __name__ == "__main__":
    main()
