"""Grade recorded agent traces without running any agent: ``python examples/recorded/run.py [OUT_DIR]``.

Each case of ``eval_set.json`` names an OTLP/JSON file (``metadata.trace_file``) recorded from a real
instrumentation; its spans are decoded, mapped to the run's trajectory and graded with ``config.json``.
Prints the console report and writes JSON and HTML reports to OUT_DIR (default: a new temp dir).
"""

from __future__ import annotations

import sys
from pathlib import Path

from tracegrade import EvalConfig, EvalReport, EvalSet, ReporterManager
from tracegrade.evaluation.engine import build_case_result, create_grader
from tracegrade.ingest.decode import read_otlp_file
from tracegrade.trajectory import map_spans

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the shared example_cli

from example_cli import run_example  # noqa: E402
from otlp_export import export_recorded  # noqa: E402


async def grade_recorded(out_dir: str) -> EvalReport:
    eval_set = EvalSet.from_file(HERE / "eval_set.json")
    config = EvalConfig.from_file(HERE / "config.json")
    grader = create_grader(config)  # refuses a config without criteria
    results = []
    for case in eval_set:
        traces, logs = read_otlp_file(HERE / case.metadata["trace_file"])
        export_recorded(traces.spans)  # to OTEL_EXPORTER_OTLP_ENDPOINT when it is set
        execution = map_spans(traces.spans, logs.records)
        criterion_results = await grader.grade(execution, case)
        results.append(build_case_result(case, execution, criterion_results, execution.duration_seconds))
    report = EvalReport.create(eval_set.eval_set_id, results, eval_set.name, config.model_dump(mode="json"))
    ReporterManager(config.reporter).run_all(report, out_dir)
    return report


if __name__ == "__main__":
    run_example(grade_recorded, temp_prefix="tracegrade-recorded-")
