"""A run recorded case by case (``record_cases``) is one write: a process killed (SIGKILL) while recording
leaves the store with the run as it was before, or with the whole new recording, never cases without their
run's row or a row that miscounts its cases."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tracegrade.evaluation.run_records import list_runs, load_run, record_cases
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.store import TraceStore

RUN = "worker:billing:w1"

# The recorder, in a process of its own: it records case "b" (and grades "a" again) into RUN on a real store
# file, and is SIGKILLed at the moment named by argv[2]. A TraceStore subclass stands where the kill happens;
# the store, its transaction and the file are the real ones.
RECORDER = textwrap.dedent(
    """
    import os, signal, sys
    from tracegrade.evaluation.run_records import record_cases
    from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
    from tracegrade.store import TraceStore

    path, moment = sys.argv[1], sys.argv[2]

    def die():
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)

    class DyingStore(TraceStore):
        def write_records(self, tables):
            if moment == "before-run-row" and "eval_runs" in tables:
                die()  # the run's row is about to be written: whatever was written before it stays
            super().write_records(tables)

        def _write_records(self, tables):
            super()._write_records(tables)
            if moment == "before-commit" and "eval_runs" in tables:
                die()  # every row written, the transaction not committed

    def case(eval_id, passed):
        return EvalCaseResult.success(eval_id, [CriterionResult.success("keywords", 1.0 if passed else 0.0, 0.5)])

    store = DyingStore(path)
    record_cases(store, EvalReport.create("online", [case("a", False), case("b", True)]), "worker", sys.argv[3], {})
    print("recorded")
    store.close()
    """
)


def _case(eval_id: str, passed: bool) -> EvalCaseResult:
    return EvalCaseResult.success(eval_id, [CriterionResult.success("keywords", 1.0 if passed else 0.0, 0.5)])


def _recorded(path: Path) -> tuple[list[tuple[object, ...]], list[tuple[str, bool]], list[tuple[str, bool]]]:
    """The run's (total, passed, failed) as listed, its cases as stored, and its cases as ``load_run`` gives them."""
    with TraceStore(path, read_only=True) as store:
        listed = [(r.total_cases, r.passed_cases, r.failed_cases) for r in list_runs(store) if r.run_id == RUN]
        stored = store.query(
            "SELECT eval_id, passed FROM eval_case_results WHERE run_id = ? ORDER BY eval_id", [RUN]
        ).rows
        loaded = [(r.eval_id, r.passed) for r in load_run(store, RUN).results] if listed else []
    return listed, stored, loaded


BEFORE = ([(1, 1, 0)], [("a", True)], [("a", True)])
AFTER = ([(2, 1, 1)], [("a", False), ("b", True)], [("a", False), ("b", True)])


@pytest.mark.parametrize("moment", ["before-run-row", "before-commit", "never"])
def test_a_recorder_killed_while_recording_leaves_the_run_whole(tmp_path: Path, moment: str) -> None:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        record_cases(store, EvalReport.create("online", [_case("a", True)]), "worker", RUN, {})
    assert _recorded(path) == BEFORE
    done = subprocess.run(
        [sys.executable, "-c", RECORDER, str(path), moment, RUN], capture_output=True, text=True, timeout=120
    )
    if moment == "never":
        assert done.returncode == 0, done.stderr
        assert _recorded(path) == AFTER
        return
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "recorded" not in done.stdout
    assert _recorded(path) in (BEFORE, AFTER)
