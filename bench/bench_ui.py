"""UI benchmark: the traces page and its JSON API on a store of 1,000,000 spans, over HTTP.

The store is filled quickly but realistically: a template of distinct agent traces (GenAI conventions:
invoke_agent root, chat spans with messages, execute_tool spans; some failing, some tagged as eval cases,
three services, four tools) is mapped by the real mapper once, then copied with new trace and span ids and
shifted times, as Arrow batches through ``TraceStore.write_batch`` (spans) and
``TraceStore.replace_trajectories`` (traces, node_visits, tool_calls, llm_calls). The UI then runs on the
store opened read-only, as ``tracegrade ui`` runs it, behind aiohttp on 127.0.0.1; every request is timed
from the client (median, min and max of --repeat runs after one warm-up).

    python bench/bench_ui.py --spans 1000000 --repeat 3
    python bench/bench_ui.py --store KEPT.duckdb --tool-filter-sql 7   # the tool filter's SQL, before and after
    python bench/bench_ui.py --store KEPT.duckdb --as-tenant default   # read as one tenant, and the whole store

``--as-tenant NAME`` serves the UI twice, on the whole store (as a receiver with one token does) and as
tenant NAME (as ``serve --tokens`` does: every query on views of the tenant's rows), and times each request
on both, alternating. ``--tenant-sql N`` (with ``--as-tenant``) runs the traces page's reads (first page,
filter choices, one trace) on both, alternating, N rounds: process CPU time and wall time, medians.

``--tool-filter-sql N`` times the trace list's tool filter as SQL on the store (the first page, as
``ui/api.py`` asks it), the way it is answered now (``list_contains(tool_names, ?)``, schema version 6) and
the way it was before (a semi-join of ``traces`` with ``tool_calls``), alternating, N rounds: CPU seconds of
the process (DuckDB's threads included) and wall time, medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from aiohttp import ClientSession, web
from aiohttp.test_utils import TestServer

from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore
from tracegrade.store.prepared import PreparedWrite, prepare_write
from tracegrade.store.tenant_scope import TenantStore
from tracegrade.store.trajectories import map_traces
from tracegrade.ui import add_ui_routes

_BASE_NS = 1_760_000_000_000_000_000
_TRACE_GAP_NS = 50_000_000  # one trace every 50 ms: 100,000 traces span about 80 minutes
_TOOLS = ("get_weather", "lookup_order", "search_docs", "refund_payment")
_TOPICS = ("weather in Paris", "my order status", "the refund policy", "opening hours", "a broken invoice")


def _message(role: str, text: str) -> str:
    return json.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}])


def template_trace(n: int, spans_per_trace: int) -> list[SpanRecord]:
    """Template trace ``n``: a root and alternating chat / tool spans; every 7th fails, every 3rd is an eval case."""
    trace_id, start = f"{n:032x}", _BASE_NS + n * _TRACE_GAP_NS
    question = f"question {n} about {_TOPICS[n % len(_TOPICS)]}, with some detail " * 3
    service = ("support-bot", "billing", "search")[n % 3]
    root_attrs: dict[str, Any] = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "assistant"}
    if n % 3 == 0:
        root_attrs |= {"tracegrade.case.id": f"case-{n}", "tracegrade.eval_set.id": "bench"}
    root = SpanRecord(
        trace_id=trace_id,
        span_id=f"{n * 100:016x}",
        name="tracegrade.turn bench" if n % 3 == 0 else "invoke_agent assistant",
        start_ns=start,
        end_ns=start + spans_per_trace * 1_000_000,
        attributes=root_attrs,
        status_code="ERROR" if n % 7 == 0 else "UNSET",
        resource={"service.name": service},
    )
    spans = [root]
    for i in range(1, spans_per_trace):
        chat = i % 2 == 1
        tool = _TOOLS[(n + i) % len(_TOOLS)]
        last = i >= spans_per_trace - 2
        attributes: dict[str, Any] = (
            {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "gpt-4o-mini",
                "gen_ai.input.messages": _message("user", question),
                "gen_ai.usage.input_tokens": 120,
                "gen_ai.usage.output_tokens": 30,
            }
            | ({"gen_ai.output.messages": _message("assistant", f"answer {n}: all done")} if last else {})
            if chat
            else {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": f"call_{n}_{i}",
                "gen_ai.tool.call.arguments": json.dumps({"query": question[:40]}),
                "gen_ai.tool.call.result": "ok",
            }
        )
        spans.append(
            SpanRecord(
                trace_id=trace_id,
                span_id=f"{n * 100 + i:016x}",
                parent_span_id=root.span_id,
                name="chat gpt-4o-mini" if chat else f"execute_tool {tool}",
                start_ns=start + i * 1_000_000,
                end_ns=start + i * 1_000_000 + 800_000,
                attributes=attributes,
                resource={"service.name": service},
            )
        )
    return spans


def _copy(table: pa.Table, copy: int, templates: int) -> pa.Table:
    """``table`` with each trace id moved to copy ``copy`` (new trace and span ids, times shifted)."""
    shift_ns = copy * templates * _TRACE_GAP_NS
    columns = {}
    for name in table.column_names:
        column = table[name]
        if name == "trace_id":  # template n -> n + copy * templates, still 32 hex digits
            column = pa.array([f"{int(t, 16) + copy * templates:032x}" for t in column.to_pylist()], pa.string())
        elif name in ("span_id", "parent_span_id"):
            column = pa.array([None if s is None else f"{copy:06x}{s[6:]}" for s in column.to_pylist()], pa.string())
        elif name.endswith("_ns") and pa.types.is_integer(column.type):
            column = pc.add(column, pa.scalar(shift_ns, column.type))
        elif pa.types.is_timestamp(column.type) and name not in ("updated_at", "received_at"):
            column = pc.add(column, pa.scalar(shift_ns // 1000, pa.duration("us")))
        columns[name] = column
    return pa.table(columns)


def fill(path: Path, total_spans: int, spans_per_trace: int, templates: int) -> dict[str, float]:
    """Write ``total_spans`` spans and their trajectory rows; returns how long each part took."""
    started = time.perf_counter()
    spans = {f"{n:032x}": template_trace(n, spans_per_trace) for n in range(templates)}
    template_spans = prepare_write([s for trace in spans.values() for s in trace]).spans
    store = TraceStore(path)
    try:
        stamp = store.stamp()
        trajectory = map_traces(spans, {}, stamp).to_arrow()
        copies = total_spans // (templates * spans_per_trace)
        write_s = rows_s = 0.0
        for copy in range(copies):
            t0 = time.perf_counter()
            table = _copy(template_spans, copy, templates)
            store.write_batch([PreparedWrite(table, None, table.num_rows, 0)])
            t1 = time.perf_counter()
            store.replace_trajectories({k: _copy(v, copy, templates) for k, v in trajectory.items()}, clear=[])
            write_s, rows_s = write_s + t1 - t0, rows_s + time.perf_counter() - t1
        store.checkpoint()
        (count,) = store.query("SELECT count(*) FROM spans").rows[0]
        (traces,) = store.query("SELECT count(*) FROM traces").rows[0]
    finally:
        store.close()
    return {"spans": count, "traces": traces, "spans_s": write_s, "trajectory_s": rows_s,
            "total_s": time.perf_counter() - started}  # fmt: skip


async def measure(path: Path, repeat: int, tenant: str | None = None) -> dict[str, list[float]]:
    store = TraceStore(path, read_only=True)
    readers = {"": store} | ({f" [as {tenant}]": TenantStore(store, tenant)} if tenant else {})
    servers = {}
    for label, reader in readers.items():
        app = web.Application()
        add_ui_routes(app, lambda _, reader=reader: reader)
        servers[label] = TestServer(app, host="127.0.0.1")
        await servers[label].start_server()
    timings: dict[str, list[float]] = {}
    try:
        async with ClientSession() as client:

            async def get(path: str, params: dict[str, str] | None = None, label: str = "") -> Any:
                async with client.get(servers[label].make_url(path), params=params) as response:
                    assert response.status == 200, await response.text()
                    return await (response.json() if "/api/" in path else response.text())

            page = await get("/ui/api/traces", {"limit": "200"})
            for _ in range(9):  # 2,000 traces deep (a small store ends sooner)
                if page["next_cursor"] is None:
                    break
                page = await get("/ui/api/traces", {"limit": "200", "cursor": page["next_cursor"]})
            deep_cursor = page["next_cursor"]
            some_trace = page["traces"][0]["trace_id"]
            deep = {"api: page after 2,000 traces": ("/ui/api/traces", {"cursor": deep_cursor})} if deep_cursor else {}
            cases = {
                "api: first page (50)": ("/ui/api/traces", {}),
                **deep,
                "api: text search 'refund'": ("/ui/api/traces", {"text": "refund"}),
                "api: tool refund_payment": ("/ui/api/traces", {"tool": "refund_payment"}),
                "api: status error": ("/ui/api/traces", {"status": "error"}),
                "api: service billing + eval traffic": ("/ui/api/traces", {"service": "billing", "traffic": "eval"}),
                "api: last 10 minutes": ("/ui/api/traces", {"since": "10m"}),
                "page: /ui/ (rows and filter choices)": ("/ui/", {}),
                "page: /ui/?fragment=rows (polling)": ("/ui/", {"fragment": "rows"}),
                "page: one trace": (f"/ui/traces/{some_trace}", {}),
            }
            for name, (target, params) in cases.items():
                for label in servers:
                    await get(target, params, label)  # warm-up: DuckDB's caches, the first parse
                for _ in range(repeat):
                    for label in servers:  # alternating, when reading as a tenant too
                        t0 = time.perf_counter()
                        await get(target, params, label)
                        timings.setdefault(name + label, []).append((time.perf_counter() - t0) * 1000)
    finally:
        for server in servers.values():
            await server.close()
        store.close()
    return timings


_TOOL_FILTERS = {
    "list_contains(tool_names)": "list_contains(tool_names, ?)",
    "semi-join with tool_calls (before)": "trace_id IN (SELECT trace_id FROM tool_calls WHERE name = ?)",
}


def tool_filter_sql(path: Path, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(CPU ms, wall ms) of each way to filter the first page by a tool, alternating, ``rounds`` times each."""
    from tracegrade.ui.api import _LIST_COLUMNS

    store = TraceStore(path, read_only=True)
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in _TOOL_FILTERS}
    try:
        for round_no in range(rounds + 1):  # round 0 warms the caches up
            for name, condition in _TOOL_FILTERS.items():
                sql = (
                    f"SELECT {_LIST_COLUMNS} FROM traces WHERE {condition} "
                    "ORDER BY start_time DESC NULLS LAST, trace_id LIMIT 51"
                )
                cpu, wall = time.process_time(), time.perf_counter()
                rows = store.query(sql, ["refund_payment"]).rows
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                assert len(rows) == 51, (name, len(rows))
                if round_no:
                    timings[name].append((cpu * 1000, wall * 1000))
    finally:
        store.close()
    return timings


def tenant_reads(path: Path, tenant: str, rounds: int) -> dict[str, list[tuple[float, float]]]:
    """(CPU ms, wall ms) of the traces page's reads on the whole store and as ``tenant``, alternating."""
    from tracegrade.ui import api

    store = TraceStore(path, read_only=True)
    readers = {"whole store": store, f"as {tenant}": TenantStore(store, tenant)}
    timings: dict[str, list[tuple[float, float]]] = {name: [] for name in readers}
    try:
        some_trace = api.list_traces(store, api.TraceFilters(), 1)["traces"][0]["trace_id"]
        for round_no in range(rounds + 1):  # round 0 warms the caches up
            for name, reader in readers.items():
                cpu, wall = time.process_time(), time.perf_counter()
                api.list_traces(reader, api.TraceFilters(), 50)
                api.facets(reader)
                api.trace_detail(reader, some_trace)
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                if round_no:
                    timings[name].append((cpu * 1000, wall * 1000))
    finally:
        store.close()
    return timings


def _print_cpu_wall(timings: dict[str, list[tuple[float, float]]]) -> None:
    for name, values in timings.items():
        cpu, wall = [v[0] for v in values], [v[1] for v in values]
        print(
            f"{name:36s} CPU median {statistics.median(cpu):6.1f} ms [{min(cpu):.1f}–{max(cpu):.1f}]  "
            f"wall median {statistics.median(wall):6.1f} ms [{min(wall):.1f}–{max(wall):.1f}]"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--spans-per-trace", type=int, default=10)
    parser.add_argument("--templates", type=int, default=500, help="distinct traces mapped by the real mapper")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--store", type=Path, help="keep the store here (default: a temporary directory)")
    parser.add_argument("--tool-filter-sql", type=int, metavar="N", help="only compare the tool filter's SQL, N rounds")
    parser.add_argument("--as-tenant", metavar="NAME", help="also time every request read as this tenant")
    parser.add_argument("--tenant-sql", type=int, metavar="N", help="with --as-tenant: the page's reads, N rounds")
    args = parser.parse_args()
    if args.tool_filter_sql or args.tenant_sql:
        if args.store is None or not args.store.exists():
            parser.error("--tool-filter-sql and --tenant-sql read a filled store: give one with --store")
        if args.tool_filter_sql:
            _print_cpu_wall(tool_filter_sql(args.store, args.tool_filter_sql))
        if args.tenant_sql:
            if not args.as_tenant:
                parser.error("--tenant-sql compares the whole store with a tenant: give --as-tenant NAME")
            _print_cpu_wall(tenant_reads(args.store, args.as_tenant, args.tenant_sql))
        return
    with tempfile.TemporaryDirectory() as scratch:
        path = args.store or Path(scratch) / "bench-ui.duckdb"
        if not path.exists():
            print(json.dumps({"fill": fill(path, args.spans, args.spans_per_trace, args.templates)}))
        for name, values in asyncio.run(measure(path, args.repeat, args.as_tenant)).items():
            print(f"{name:42s} median {statistics.median(values):7.1f} ms  [{min(values):.1f}–{max(values):.1f}]")


if __name__ == "__main__":
    main()
