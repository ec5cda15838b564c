"""A calibration set on which the humans and the judge gave every item one verdict says nothing of agreement.

Cohen's kappa is then 0/0. ``agreement`` reported it as 1.0, so a judge that passes everything, calibrated
on labels that were all "pass", met any ``min_agreement`` (``tracegrade calibrate`` exited 0 and runs trusted
it). Now the kappa is None ("n/a") and the calibration is refused with what to add.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.judges_setup import fresh_server, scripted_server  # noqa: F401
from tests.support.llm_server import LLMServer, Reply
from tests.test_calibrate import calibrate, write_config
from tracegrade.evaluation.calibration import agreement


def test_one_verdict_on_both_sides_has_no_kappa() -> None:
    measured = agreement([1.0, 1.0, 1.0], [0.9, 0.8, 1.0], threshold=0.5, graded=False)
    assert measured.accuracy == 1.0 and measured.kappa is None
    # graded: both sides on the top level of a 5-level scale throughout
    measured = agreement([1.0, 1.0], [1.0, 0.99], threshold=0.5, graded=True, levels=5)
    assert measured.kappa is None and measured.kappa_linear is None and measured.kappa_quadratic is None


def test_one_verdict_on_one_side_only_is_a_kappa_of_0() -> None:
    # humans: 2 pass, 2 fail; the judge passes all: observed agreement 1/2, expected 1/2 -> kappa 0
    measured = agreement([1.0, 1.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], threshold=0.5, graded=False)
    assert measured.kappa == 0.0


def test_calibrate_refuses_a_judge_that_passes_everything_on_all_pass_labels(tmp_path: Path, server: LLMServer) -> None:
    server.responder = lambda request: Reply.score(1.0, "looks fine")
    config = write_config(tmp_path, server, min_agreement=0.6, num_samples=1)
    labels = tmp_path / "labels.jsonl"
    labels.write_text(
        "\n".join(json.dumps({"id": f"item-{n}", "response": f"answer {n}", "label": "pass"}) for n in range(8))
    )
    result = calibrate(tmp_path, config, labels)
    assert result.exit_code == 1, result.output
    (entry,) = json.loads(result.stdout)
    assert entry["accuracy"] == 1.0 and entry["kappa"] is None
    assert "the same verdict (pass): kappa is undefined" in result.stderr
    assert "add labelled items the humans judged the other way" in result.stderr
