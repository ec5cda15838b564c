"""The case results a pytest session graded, gathered into one report (across pytest-xdist workers too).

The pytest plugin installs one :class:`SessionRecorder` per process while a session runs and tells it which
test is running; :func:`tracegrade.testing.run_eval` (and ``eval_test``) hand it every report they produce.
A worker ships its entries to the controller as JSON (:meth:`SessionRecorder.to_payload`), so the
controller can write one merged report however the cases were spread over workers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the plugin imports this module in every pytest run: the models load on first use
    from tracegrade.models.results import EvalCaseResult, EvalReport

__all__ = ["RecordedCase", "SessionRecorder", "active_recorder", "set_active_recorder"]

#: eval set id of a merged report whose cases came from more than one eval set
MIXED_EVAL_SET_ID = "pytest"


@dataclass
class RecordedCase:
    """One graded case and the test that graded it (``order``: the test's position in the collection)."""

    order: int
    test_id: str
    eval_set_id: str
    eval_set_name: str
    result: EvalCaseResult
    config_used: dict[str, Any] = field(default_factory=dict)


class SessionRecorder:
    """Gathers the case results of one pytest process; :meth:`merged_report` makes the session's report."""

    def __init__(self) -> None:
        self.cases: list[RecordedCase] = []
        self.current_test: tuple[int, str] = (0, "")
        self.num_runs: int | None = None  # --tracegrade-num-runs: trials per case of every run in the session

    def record(self, report: EvalReport) -> None:
        order, test_id = self.current_test
        for result in report.results:
            self.cases.append(
                RecordedCase(order, test_id, report.eval_set_id, report.eval_set_name, result, report.config_used)
            )

    def to_payload(self) -> str:
        return json.dumps(
            [
                {
                    "order": c.order,
                    "test_id": c.test_id,
                    "eval_set_id": c.eval_set_id,
                    "eval_set_name": c.eval_set_name,
                    "result": c.result.model_dump(mode="json"),
                    "config_used": c.config_used,
                }
                for c in self.cases
            ],
            default=str,
        )

    def add_payload(self, payload: str) -> None:
        """Add the entries another process recorded (see :meth:`to_payload`)."""
        from tracegrade.models.results import EvalCaseResult

        for entry in json.loads(payload):
            entry["result"] = EvalCaseResult.model_validate(entry["result"])
            self.cases.append(RecordedCase(**entry))

    def merged_report(self) -> EvalReport | None:
        """Every recorded case in collection order, as one report (None when nothing was graded).

        Each result's ``metadata["pytest_test"]`` names the test that graded it. The report keeps the eval
        set's id and name when every case came from one set, and the config when every case used the same.
        """
        if not self.cases:
            return None
        from tracegrade.models.results import EvalReport

        cases = sorted(self.cases, key=lambda c: (c.order, c.test_id))
        sets = {(c.eval_set_id, c.eval_set_name) for c in cases}
        eval_set_id, eval_set_name = sets.pop() if len(sets) == 1 else (MIXED_EVAL_SET_ID, "pytest session")
        configs = {json.dumps(c.config_used, sort_keys=True, default=str) for c in cases}
        results = [
            c.result.model_copy(update={"metadata": {**c.result.metadata, "pytest_test": c.test_id}}) for c in cases
        ]
        return EvalReport.create(
            eval_set_id,
            results,
            eval_set_name,
            config_used=cases[0].config_used if len(configs) == 1 else {},
            metadata={"source": "pytest", "eval_sets": sorted({c.eval_set_id for c in cases})},
        )


_active: SessionRecorder | None = None


def active_recorder() -> SessionRecorder | None:
    """The recorder of the running pytest session (None outside pytest or without the plugin)."""
    return _active


def set_active_recorder(recorder: SessionRecorder | None) -> None:
    global _active
    _active = recorder
