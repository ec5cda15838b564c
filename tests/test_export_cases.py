"""``tracegrade export-cases``: stored traces become an eval set that grades back as passing."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.grading_cli import read_report, run_cli, write_config
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.models import EvalSet
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig

STRICT = EvalConfig(
    criteria=CriteriaConfig(
        tool_name_match=CriterionConfig.tool_name_match(),
        trajectory=CriterionConfig.trajectory(check_args=True),
        node_order=CriterionConfig.node_order(),
        rouge_match=CriterionConfig.rouge_match(threshold=1.0),
    )
)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    runs = [
        AgentRun(
            1,
            "refund order 1",
            "refunded order 1",
            [("lookup", {"order": 1}), ("refund", {"order": 1})],
            service="billing",
        ),
        AgentRun(
            2,
            "invoice for May",
            "here is your invoice",
            [("invoice", {"month": "May", "pdf": True})],
            nodes=("planner", "writer", "responder"),
            service="billing",
            start_offset_s=1,
        ),
        AgentRun(3, "hello", "hi", [], service="chitchat", start_offset_s=2),
    ]
    fill_store(tmp_path / "store.duckdb", runs).close()
    write_config(tmp_path / "config.json", STRICT)
    return tmp_path / "store.duckdb"


def _grade(store_path: Path, cases: Path, out: Path):
    return run_cli(
        "grade",
        "--store",
        store_path,
        "--evalset",
        cases,
        "--config",
        store_path.parent / "config.json",
        "--out",
        out,
        "--format",
        "json",
        "--no-record",
    )


def test_exported_cases_round_trip_into_a_passing_grade(store_path: Path, tmp_path: Path) -> None:
    cases = tmp_path / "cases.json"
    result = run_cli(
        "export-cases", "--store", store_path, "--where", "service_name = 'billing'", "-o", cases, "--name", "golden"
    )
    assert result.exit_code == 0, result.output
    eval_set = EvalSet.from_file(cases)
    assert eval_set.eval_set_id == "golden" and len(eval_set) == 2
    # one case id per trace, also for 64-bit trace ids padded to 128 bits (these fixtures' ids start with 16 zeros)
    assert sorted(c.eval_id for c in eval_set.eval_cases) == [f"trace-{n:032x}" for n in (1, 2)]
    invoice = next(c for c in eval_set.eval_cases if c.first_user_text() == "invoice for May").conversation[0]
    assert [(t.name, t.args) for t in invoice.expected_tool_trajectory] == [("invoice", {"month": "May", "pdf": True})]
    assert invoice.expected_node_order == ["support-agent", "planner", "writer", "responder"]
    assert invoice.expected_final_response.get_text() == "here is your invoice"

    graded = _grade(store_path, cases, tmp_path / "out")
    assert graded.exit_code == 0, graded.output
    report = read_report(tmp_path / "out")
    assert len(report.results) == 2 and report.passed
    assert all(r.metadata["match_strategy"] == "selector" for r in report.results)

    # edit the golden set: the refund is now expected with another order number -> that case fails
    refund = next(c for c in eval_set.eval_cases if c.first_user_text() == "refund order 1")
    refund.conversation[0].expected_tool_trajectory[1].args = {"order": 2}
    eval_set.to_file(cases)
    assert _grade(store_path, cases, tmp_path / "out2").exit_code == 1


def test_export_with_a_bad_predicate_writes_nothing(store_path: Path, tmp_path: Path) -> None:
    cases = tmp_path / "cases.json"
    result = run_cli("export-cases", "--store", store_path, "--where", "nonsense ===", "-o", cases)
    assert result.exit_code == 2 and "is not a valid predicate over the traces table" in result.stderr
    assert not cases.exists()
