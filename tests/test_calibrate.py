"""`tracegrade calibrate` against a real local OpenAI-compatible judge scripted to agree 90% with human labels,
and `min_agreement` enforced on a real run (fail, or warn).

The numbers asserted are hand calculations (shown next to each), not the code's own output read back.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from scipy import stats

from tests.support import pg_cluster
from tests.support.grading_traces import AgentRun, fill_store
from tests.support.judges_setup import JUDGE_MODEL, fresh_server, scripted_server  # noqa: F401
from tests.support.llm_server import LLMServer, ReceivedRequest, Reply
from tests.support.store_kinds import STORE_KINDS, location, open_store
from tracegrade.cli.main import cli
from tracegrade.evaluation.calibration import CalibrationError, agreement, load_calibrations
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalCase, EvalSet
from tracegrade.store import TraceStore
from tracegrade.testing import run_eval_sync

ITEM = re.compile(r"item-(\d\d)")
HUMAN_PASS = range(12)  # items 00-11 are labelled pass, 12-19 fail
WRONG = {3: 0.0, 15: 1.0}  # the judge disagrees with the humans on two items of twenty: 90% agreement
SPLIT_ITEM = 5  # its three samples score 1, 1, 0: mean 0.667, still a pass at threshold 0.5

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture), for the lake


def judge_responder(counts: dict[int, int]):
    """Scores each prompt by the item number in it: the human verdict, except for WRONG and SPLIT_ITEM."""

    def respond(request: ReceivedRequest) -> Reply:
        found = ITEM.search(request.prompt)
        if found is None:  # a live run's own case
            return Reply.score(1.0, "fine")
        n = int(found.group(1))
        counts[n] = counts.get(n, 0) + 1
        if n == SPLIT_ITEM:
            return Reply.score(0.0 if counts[n] == 3 else 1.0, "split")
        return Reply.score(WRONG.get(n, 1.0 if n in HUMAN_PASS else 0.0), "scripted")

    return respond


def write_config(tmp_path: Path, server: LLMServer, **criterion) -> Path:
    judge = {
        "judge_model": JUDGE_MODEL,
        "api_base": server.base_url,
        "api_key": "test-key",
        "api_style": "chat",
        "num_samples": 3,
        "threshold": 0.5,
        "timeout_seconds": 30.0,  # generous: the local judge answers at once, unless the machine is loaded
        **criterion,
    }
    config = {
        "criteria": {"safety": judge, "contains_keywords": {"keywords": ["fine"]}},
        "judge_cache": False,
        "calibration_file": str(tmp_path / "calibration.json"),
    }
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


def write_labels(tmp_path: Path) -> Path:
    lines = [
        {"id": f"item-{n:02d}", "question": "Is this fine?", "response": f"answer for item-{n:02d}",
         "label": "pass" if n in HUMAN_PASS else "fail"}
        for n in range(20)
    ]  # fmt: skip
    path = tmp_path / "labels.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    return path


def calibrate(tmp_path: Path, config: Path, labels: Path, *extra: str):
    return CliRunner().invoke(
        cli, ["calibrate", "--labels", str(labels), "--config", str(config), "--format", "json", *extra]
    )


@pytest.fixture
def calibrated(tmp_path: Path, server: LLMServer) -> Path:
    server.responder = judge_responder({})
    config = write_config(tmp_path, server, min_agreement=0.75)
    result = calibrate(tmp_path, config, write_labels(tmp_path))
    assert result.exit_code == 0, result.output
    return config


def test_kappa_accuracy_confusion_and_self_consistency_match_a_hand_calculation(calibrated, tmp_path, server):
    (entry,) = load_calibrations(tmp_path / "calibration.json")
    assert entry["criterion"] == "safety_v1" and entry["judge_model"] == JUDGE_MODEL
    assert re.fullmatch(r"[0-9a-f]{12}", entry["prompt_version"]) and entry["num_samples"] == 3
    assert len(server.requests) == 60  # 20 items x 3 samples, nothing from a cache
    # human pass/fail 12/8; judge: item 03 pass->fail, item 15 fail->pass, item 05 passes on its mean
    assert entry["confusion"] == {
        "human_pass": {"judge_pass": 11, "judge_fail": 1},
        "human_fail": {"judge_pass": 1, "judge_fail": 7},
    }
    assert entry["items"] == 20 and entry["accuracy"] == pytest.approx(0.9)
    # p_o = 18/20 = 0.9; judge also says pass 12 times: p_e = 0.6 * 0.6 + 0.4 * 0.4 = 0.52
    # kappa = (0.9 - 0.52) / (1 - 0.52) = 0.38 / 0.48 = 19/24
    assert entry["kappa"] == pytest.approx(19 / 24)
    human = [1.0 if n in HUMAN_PASS else 0.0 for n in range(20)]
    judge = [2 / 3 if n == SPLIT_ITEM else WRONG.get(n, h) for n, h in enumerate(human)]
    assert entry["spearman"] == pytest.approx(stats.spearmanr(human, judge).statistic)
    assert entry["kappa_linear"] is None and entry["scale"] == []  # pass/fail labels: no graded scale
    # 19 of 20 items unanimous; only item 05 spreads: range 1, population sd sqrt(2/9)
    assert entry["self_consistency"] == pytest.approx(
        {
            "items": 20,
            "samples_per_item": 3,
            "unanimous_rate": 0.95,
            "mean_range": 0.05,
            "mean_stdev": (2 / 9) ** 0.5 / 20,
        }
    )
    wrong = sorted(r["id"] for r in entry["results"] if not r["agree"])
    assert wrong == ["item-03", "item-15"]


def test_graded_labels_give_weighted_kappas_on_a_fixed_scale(tmp_path, server):
    # humans on a 3-level scale; the judge gives item 03 half marks where the human gave full marks
    human = {0: 0.0, 1: 0.5, 2: 1.0, 3: 1.0, 4: 0.5, 5: 0.0}
    judged = {**human, 3: 0.5}
    server.responder = lambda r: Reply.score(judged[int(ITEM.search(r.prompt).group(1))])
    labels = tmp_path / "graded.jsonl"
    labels.write_text(
        "\n".join(
            json.dumps({"id": f"item-{n:02d}", "response": f"item-{n:02d}", "score": s}) for n, s in human.items()
        )
    )
    config = write_config(tmp_path, server, num_samples=1)
    result = calibrate(tmp_path, config, labels, "--levels", "3")
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    assert entry["scale"] == [0.0, 0.5, 1.0] and entry["self_consistency"] is None
    # levels h = 0 1 2 2 1 0, j = 0 1 2 1 1 0; rows 1/3 each, columns 1/3, 1/2, 1/6; one item off by one level
    # linear: observed 1/6 * 1/2 = 1/12, expected 5/12 -> 1 - 1/5 = 0.8
    # quadratic: observed 1/6 * 1/4 = 1/24, expected 7/24 -> 1 - 1/7 = 6/7
    assert entry["kappa_linear"] == pytest.approx(0.8)
    assert entry["kappa_quadratic"] == pytest.approx(6 / 7)
    assert entry["kappa"] == pytest.approx(1.0)  # at threshold 0.5, 0.5 and 1.0 both pass: no pass/fail flip


def test_a_weighted_kappa_counts_a_level_nobody_used():
    # a 5-level scale where the raters use only 0 and 1.0: a disagreement spans the whole scale
    measured = agreement([0.0, 1.0, 1.0, 0.0], [0.0, 1.0, 0.0, 0.0], 0.5, graded=True, levels=5)
    # two categories used out of five: linear weights are 0 or 1 between them, so it equals plain kappa
    # observed 1/4 disagreement; rows 1/2 1/2, columns 3/4 1/4: expected 1/2*1/4 + 1/2*3/4 = 1/2 -> 1 - 1/2
    assert measured.kappa_linear == pytest.approx(0.5) and measured.kappa == pytest.approx(0.5)


def run_case(config_path: Path, **overrides):
    config = EvalConfig.from_file(config_path).model_copy(update=overrides)
    case = EvalCase.single_turn("live-1", "Is this fine?")
    return run_eval_sync(lambda message: "it is fine", None, EvalSet(eval_set_id="s", eval_cases=[case]), config)


def test_a_run_below_min_agreement_fails_with_the_reason(calibrated, tmp_path, server):
    strict = json.loads(calibrated.read_text())
    strict["criteria"]["safety"]["min_agreement"] = 0.85
    calibrated.write_text(json.dumps(strict))
    with pytest.raises(CalibrationError) as raised:
        run_case(calibrated)
    message = str(raised.value)
    assert "safety_v1" in message and "kappa 0.792" in message and "below min_agreement 0.85" in message
    assert "--calibration warn" in message
    assert not [r for r in server.requests if "it is fine" in r.prompt]  # nothing was judged


def test_warn_grades_and_every_result_of_the_criterion_says_why(calibrated, tmp_path):
    strict = json.loads(calibrated.read_text())
    strict["criteria"]["safety"]["min_agreement"] = 0.85
    calibrated.write_text(json.dumps(strict))
    report = run_case(calibrated, calibration="warn")
    safety = report.results[0].get_criterion_result("safety_v1")
    assert safety.passed and any("below min_agreement 0.85" in w for w in safety.warnings)
    assert any("below min_agreement 0.85" in w for w in report.summary.warnings)


def test_a_calibration_at_or_above_min_agreement_lets_the_run_through(calibrated):
    report = run_case(calibrated)  # kappa 19/24 = 0.792 >= min_agreement 0.75
    safety = report.results[0].get_criterion_result("safety_v1")
    assert safety.passed and safety.error is None and not report.summary.warnings


def test_no_calibration_or_a_changed_prompt_is_not_trusted(calibrated, tmp_path):
    other = json.loads(calibrated.read_text())
    other["criteria"]["safety"]["judge_model"] = "openai/another-judge"
    calibrated.write_text(json.dumps(other))
    with pytest.raises(CalibrationError, match="'openai/another-judge' has no calibration for safety_v1"):
        run_case(calibrated)
    stored = json.loads((tmp_path / "calibration.json").read_text())
    stored["calibrations"][0]["prompt_version"] = "000000000000"
    stored["calibrations"][0]["judge_model"] = "openai/another-judge"
    (tmp_path / "calibration.json").write_text(json.dumps(stored))
    with pytest.raises(CalibrationError, match="prompt version 000000000000"):
        run_case(calibrated)


def test_calibrate_exits_1_below_min_agreement_and_keeps_other_entries(tmp_path, server):
    server.responder = judge_responder({})
    labels = write_labels(tmp_path)
    calibrate(tmp_path, write_config(tmp_path, server, judge_model="openai/first-judge"), labels)
    result = calibrate(tmp_path, write_config(tmp_path, server, min_agreement=0.9), labels)
    assert result.exit_code == 1 and "below min_agreement 0.9" in result.stderr
    models = sorted(e["judge_model"] for e in load_calibrations(tmp_path / "calibration.json"))
    assert models == ["openai/first-judge", JUDGE_MODEL]


def test_a_given_store_keeps_the_calibrations_beside_the_file(tmp_path, server, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where a default store would be created, were one written without --store
    monkeypatch.delenv("TRACEGRADE_STORE", raising=False)
    server.responder = judge_responder({})
    labels = write_labels(tmp_path)
    alone = calibrate(tmp_path, write_config(tmp_path, server), labels)
    assert alone.exit_code == 0 and "stored" not in alone.stderr and not (tmp_path / "tracegrade.duckdb").exists()
    store_path = tmp_path / "store.duckdb"
    TraceStore(store_path).close()
    for model in ("openai/first-judge", JUDGE_MODEL, JUDGE_MODEL):  # the third replaces the second's row
        config = write_config(tmp_path, server, judge_model=model)
        result = calibrate(tmp_path, config, labels, "--store", str(store_path))
        assert result.exit_code == 0, result.output
        assert f"stored 1 calibration(s) in {store_path}" in result.stderr
    with TraceStore(store_path, read_only=True) as store:
        rows = store.query(
            "SELECT judge_model, criterion, prompt_version, items, kappa, entry FROM calibrations ORDER BY judge_model"
        ).rows
    in_file = {e["judge_model"]: e for e in load_calibrations(tmp_path / "calibration.json")}
    assert [r[0] for r in rows] == sorted(in_file) == ["openai/first-judge", JUDGE_MODEL]
    for model, criterion, version, items, kappa, entry in rows:
        assert (criterion, version, items) == ("safety_v1", in_file[model]["prompt_version"], 20)
        assert kappa == pytest.approx(19 / 24)  # the hand calculation above
        assert json.loads(entry) == json.loads(json.dumps(in_file[model]))


def test_a_store_held_by_serve_keeps_the_file_and_says_the_store_did_not_get_them(tmp_path, server):
    from tests.support.server_process import ServerProcess

    server.responder = judge_responder({})
    store_path = tmp_path / "held.duckdb"
    with ServerProcess(store_path):
        result = calibrate(tmp_path, write_config(tmp_path, server), write_labels(tmp_path), "--store", str(store_path))
    assert result.exit_code == 0, result.output
    assert "calibrations are in" in result.stderr and "`tracegrade serve` holds the store" in result.stderr
    assert [e["criterion"] for e in load_calibrations(tmp_path / "calibration.json")] == ["safety_v1"]


@STORE_KINDS
def test_labels_can_name_stored_traces(tmp_path, server, store_kind, request):
    runs = [
        AgentRun(1, "q1", "answer for item-01", case_id="c1", run_id="r1"),
        AgentRun(2, "q2", "answer for item-13", start_offset_s=5),
    ]
    store = fill_store(open_store(store_kind, tmp_path, request), runs)
    store.close()
    store_path = location(store)
    labels = tmp_path / "stored.jsonl"
    labels.write_text(
        json.dumps({"case_id": "c1", "label": "pass"})
        + "\n"
        + json.dumps({"selector": {"where": "user_query = 'q2'"}, "label": 0})
        + "\n"
    )
    server.responder = judge_responder({})
    data = ["--lake-data", str(tmp_path / "lake-data")] if store_kind == "lake" else []
    result = calibrate(tmp_path, write_config(tmp_path, server), labels, "--store", store_path, *data)
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.stdout)
    assert [(r["id"], r["human"], r["judge"]) for r in entry["results"]] == [("c1", 1.0, 1.0), ("line 2", 0.0, 0.0)]
    assert entry["accuracy"] == 1.0
    assert "stored 1 calibration(s)" in result.stderr  # in the store's calibrations table, file or lake


def test_every_problem_of_a_labels_file_is_reported_by_line(tmp_path, server):
    labels = tmp_path / "bad.jsonl"
    labels.write_text(
        "\n".join(
            [
                '{"id": "a", "response": "r"}',
                '{"id": "b", "response": "r", "label": "maybe"}',
                "not json",
                '{"id": "c", "label": "pass"}',
                '{"id": "d", "response": "r", "score": 2, "colour": 1}',
            ]
        )
    )
    result = calibrate(tmp_path, write_config(tmp_path, server), labels)
    assert result.exit_code == 2
    for line in ("line 1", "line 2", "line 3", "line 4", "line 5"):
        assert line in result.output
    assert "unknown key(s) colour" in result.output and not server.requests


def test_grade_fails_before_opening_the_store_or_warns_with_calibration_warn(calibrated, tmp_path):
    strict = json.loads(calibrated.read_text())
    strict["criteria"]["safety"]["min_agreement"] = 0.85
    calibrated.write_text(json.dumps(strict))
    store_path = tmp_path / "store.duckdb"
    fill_store(store_path, [AgentRun(1, "Is this fine?", "it is fine", case_id="c1", run_id="r1")]).close()
    cases = tmp_path / "cases.json"
    EvalSet(eval_set_id="s", eval_cases=[EvalCase.single_turn("c1", "Is this fine?")]).to_file(cases)
    args = ["grade", "--store", str(store_path), "--evalset", str(cases), "--config", str(calibrated)]
    args += ["--out", str(tmp_path / "reports"), "--no-record"]
    refused = CliRunner().invoke(cli, args)
    assert refused.exit_code == 2 and "below min_agreement 0.85" in refused.output
    assert not (tmp_path / "reports").exists()
    warned = CliRunner().invoke(cli, [*args, "--calibration", "warn", "--format", "json"])
    assert warned.exit_code == 0, warned.output
    (report,) = (tmp_path / "reports").glob("*.json")
    assert any("below min_agreement 0.85" in w for w in json.loads(report.read_text())["summary"]["warnings"])


def test_every_report_shows_how_far_the_judge_samples_disagree(tmp_path, server):
    import io

    from tracegrade.reporters import ConsoleReporter, HTMLReporter, JSONReporter, JUnitXMLReporter

    answers = iter([1.0, 1.0, 0.0])  # one judge sample of three fails: mean 0.667 passes at threshold 0.5
    server.responder = lambda request: Reply.score(next(answers, 1.0))
    report = run_case(write_config(tmp_path, server))
    safety = report.results[0].get_criterion_result("safety_v1")
    assert safety.details["sample_spread"] == pytest.approx(
        {"samples": 3, "range": 1.0, "stdev": (2 / 9) ** 0.5, "split": True}
    )
    expected = "3 judge samples, range 1.00, sd 0.47, split on pass/fail"
    console = io.StringIO()
    ConsoleReporter(use_color=False, verbose=True, output=console).report(report)
    assert expected in console.getvalue()
    assert expected in JUnitXMLReporter().render(report)
    assert expected in HTMLReporter().to_html(report)
    criteria = json.loads(JSONReporter().render(report))["results"][0]["criterion_results"]
    assert next(c for c in criteria if c["criterion"] == "safety_v1")["details"]["sample_spread"]["split"] is True
