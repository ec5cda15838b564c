"""Grading inside and through ``tracegrade serve``: the in-process online worker (``--worker-rules``) grades
traces as they arrive over OTLP, and ``tracegrade grade`` run while the server holds the file reads through
its query endpoint and records the run through ``POST /v1/runs``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support.grading_cli import read_report, run_cli, write_config
from tests.support.server_process import ServerProcess
from tests.support.waiting import wait_for_value
from tracegrade.evaluation.run_records import list_runs, load_run
from tracegrade.evaluation.selection import iter_executions
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig
from tracegrade.store import RemoteStore
from tracegrade.store import rows as store_rows

RULES = """
rules:
  - name: refunds
    where: "user_query LIKE '%refund%'"
    settle_seconds: 0
    criteria:
      contains_keywords: {keywords: ["refund"], threshold: 1.0}
poll_seconds: 0.2
lease_seconds: 30
"""


def _send_turns(http_url: str, turns: list[tuple[str, str]]) -> None:
    """One trace per (question, answer): a turn root, an agent node and a lookup tool, exported over OTLP/HTTP."""
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=http_url + "/v1/traces")))
    tracer = provider.get_tracer("test")
    node = {"tracegrade.span.kind": "node", "tracegrade.node.name": "agent"}
    for question, answer in turns:
        turn = {"tracegrade.turn.input": question, "tracegrade.turn.output": answer}
        tool = {
            "tracegrade.span.kind": "tool",
            "tracegrade.tool.name": "lookup",
            "tracegrade.tool.arguments": json.dumps({"q": question}),
            "tracegrade.tool.result": "found",
        }
        with (
            tracer.start_as_current_span("tracegrade.turn prod", attributes=turn),
            tracer.start_as_current_span("agent", attributes=node),
            tracer.start_as_current_span("lookup", attributes=tool),
        ):
            pass
    provider.shutdown()


def test_in_process_worker_grades_arriving_traces_and_grade_records_through_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES, encoding="utf-8")
    store = tmp_path / "store.duckdb"
    with ServerProcess(store, extra_args=("--worker-rules", str(rules))) as server:
        _send_turns(
            server.http_url,
            [("Where is my refund?", "Your refund was sent."), ("Is a refund possible?", "No."), ("Hello", "Hi")],
        )
        remote = RemoteStore(server.http_url)
        # the rule selects the two refund questions; the worker grades each once
        done = "SELECT count(*) FROM grading_jobs WHERE status = 'done'"  # the table appears with the first cycle
        wait_for_value(lambda: remote.query(done).rows, [(2,)], done)
        rows = remote.query(
            "SELECT t.user_query, r.score FROM eval_results r JOIN traces t USING (trace_id) ORDER BY t.user_query"
        ).rows
        assert rows == [("Is a refund possible?", 0.0), ("Where is my refund?", 1.0)]
        # stored executions read through the server with their ids as one JSON parameter (a long list's form)
        ids = [r[0] for r in remote.query("SELECT trace_id FROM traces ORDER BY trace_id").rows]
        literal = [(s.trace_id, s.execution) for s in iter_executions(remote, ids)]
        monkeypatch.setattr(store_rows, "LONG_STRING_LIST", 0)
        monkeypatch.setattr(store_rows, "FEW_STRINGS", 0)
        assert [(s.trace_id, s.execution) for s in iter_executions(remote, ids)] == literal
        assert len(literal) == 3 and all(execution is not None for _, execution in literal)
        monkeypatch.undo()

        config = write_config(
            tmp_path / "config.json",
            EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["Hi"]))),
        )
        result = run_cli(
            "grade",
            "--store",
            store,
            "--where",
            "user_query = 'Hello'",
            "--config",
            config,
            "--out",
            tmp_path / "reports",
            "--format",
            "json",
        )
        assert result.exit_code == 0, result.output
        assert remote.query(
            "SELECT kind, total_cases, passed_cases FROM eval_runs WHERE kind = 'reference_free'"
        ).rows == [("reference_free", 1, 1)]
        (recorded,) = list_runs(remote, kind="reference_free")  # type: ignore[arg-type]
        # the stored report read back through the query endpoint is the one written to the reports folder
        assert load_run(remote, recorded.run_id).model_dump() == read_report(tmp_path / "reports").model_dump()  # type: ignore[arg-type]
        assert server.terminate() == 0
