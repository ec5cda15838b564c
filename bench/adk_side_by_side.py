"""Side by side: tracegrade's ADK-compatible scoring (``scoring="adk"``) against google-adk's own evaluators.

Every case is graded by both sides on ``tool_trajectory_avg_score`` and ``response_match_score``:

* **ADK side** (a subprocess in a separate virtualenv with google-adk; tracegrade never imports it): builds the
  expected and actual invocations with ADK's models, runs ``TrajectoryEvaluator`` and ``RougeEvaluator``, and
  writes the expected side as an ADK ``*.evalset.json`` and each case's criteria as a ``test_config.json``
  dump with ADK's own models.
* **tracegrade side**: reads that eval set with ``EvalSet.from_file`` and those configs with
  ``config_from_adk`` (as a user's ADK files are read), builds each case's execution turn by turn and grades
  it with the criteria ``build_criteria`` picks (``scoring="adk"``); for contrast it also grades with the
  seed's rules (``scoring="tracegrade"``).

It also stems every word of a large vocabulary with both NLTK and :mod:`tracegrade.criteria.porter`.
Prints an agreement table (scores equal within 1e-9) and exits 1 on any ADK-mode disagreement.

    python bench/adk_side_by_side.py [--adk-python /tmp/adkvenv2/bin/python]
    (the ADK venv: python3 -m venv /tmp/adkvenv2 && /tmp/adkvenv2/bin/pip install google-adk)
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from tracegrade.criteria.porter import stem
from tracegrade.criteria.registry import build_criteria
from tracegrade.models.adk_files import config_from_adk
from tracegrade.models.config import CriteriaConfig
from tracegrade.models.dataset import EvalSet, ToolCall
from tracegrade.models.execution import ExecutionResult, TurnRecord

Call = tuple[str, Any]  # (tool name, arguments; None: the call is written without args)


def _case(
    cid: str,
    expected: list[tuple[list[Call], str | None]],
    actual: list[tuple[list[Call], str]],
    match: str = "EXACT",
    ignore_args: bool = False,
) -> dict[str, Any]:
    return {"id": cid, "match_type": match, "ignore_args": ignore_args, "expected": expected, "actual": actual}


def _one(cid: str, want: list[Call], got: list[Call], ref: str | None, resp: str, **kw: Any) -> dict[str, Any]:
    return _case(cid, [(want, ref)], [(got, resp)], **kw)


W = ("get_weather", {"city": "Bergen"})
F = ("get_forecast", {"city": "Bergen", "days": 3})
B = ("book", {"flight": "SK123"})
REF = "It is raining in Bergen today."

CASES: list[dict[str, Any]] = [
    # --- trajectories: extra, missing, reordered calls under each match type
    _one("same_call", [W], [W], REF, REF),
    _one("extra_call_exact", [W], [W, F], REF, REF),
    _one("extra_call_in_order", [W], [F, W, B], REF, REF, match="IN_ORDER"),
    _one("extra_call_any_order", [W], [B, W], REF, REF, match="ANY_ORDER"),
    _one("missing_call_exact", [W, F], [W], REF, REF),
    _one("missing_call_in_order", [W, F], [W], REF, REF, match="IN_ORDER"),
    _one("missing_call_any_order", [W, F], [F], REF, REF, match="ANY_ORDER"),
    _one("reordered_exact", [W, F], [F, W], REF, REF),
    _one("reordered_in_order", [W, F], [F, W], REF, REF, match="IN_ORDER"),
    _one("reordered_any_order", [W, F], [F, W], REF, REF, match="ANY_ORDER"),
    _one("duplicates_any_order", [W, W], [W, F], REF, REF, match="ANY_ORDER"),
    _one("duplicates_in_order", [W, W], [W, F, W], REF, REF, match="IN_ORDER"),
    # --- arguments: values, keys, nesting, types, the empty object
    _one("wrong_value", [W], [("get_weather", {"city": "Oslo"})], REF, REF),
    _one("extra_arg", [W], [("get_weather", {"city": "Bergen", "units": "metric"})], REF, REF),
    _one("missing_arg", [F], [("get_forecast", {"city": "Bergen"})], REF, REF),
    _one("wrong_value_ignore_args", [W], [("get_weather", {"city": "Oslo"})], REF, REF, ignore_args=True),
    _one("wrong_name_ignore_args", [W], [("get_wether", {"city": "Bergen"})], REF, REF, ignore_args=True),
    _one(
        "nested_equal_key_order",
        [("search", {"q": "hotels", "filters": {"stars": 4, "area": ["centre", "harbour"]}})],
        [("search", {"filters": {"area": ["centre", "harbour"], "stars": 4}, "q": "hotels"})],
        REF,
        REF,
    ),
    _one(
        "nested_list_order",
        [("search", {"q": "hotels", "filters": {"area": ["centre", "harbour"]}})],
        [("search", {"q": "hotels", "filters": {"area": ["harbour", "centre"]}})],
        REF,
        REF,
    ),
    _one(
        "nested_deep_value",
        [("search", {"opts": [{"k": "a", "v": {"x": 1}}]})],
        [("search", {"opts": [{"k": "a", "v": {"x": 2}}]})],
        REF,
        REF,
    ),
    _one("int_vs_float", [("roll", {"sides": 6})], [("roll", {"sides": 6.0})], REF, REF),
    _one("int_vs_string", [("roll", {"sides": 6})], [("roll", {"sides": "6"})], REF, REF),
    _one("bool_vs_int", [("flag", {"on": True})], [("flag", {"on": 1})], REF, REF),
    _one("null_value", [("find", {"near": None})], [("find", {"near": None})], REF, REF),
    _one("null_vs_missing", [("find", {"near": None})], [("find", {})], REF, REF),
    _one("empty_expected_empty_actual", [("now", {})], [("now", {})], REF, REF),
    _one("empty_expected_some_actual", [("now", {})], [("now", {"tz": "UTC"})], REF, REF),
    # --- a call without args (ADK's None) is not a call with args {}
    _one("no_args_expected_empty_actual", [("now", None)], [("now", {})], REF, REF),
    _one("empty_expected_no_args_actual", [("now", {})], [("now", None)], REF, REF),
    _one("no_args_both", [("now", None)], [("now", None)], REF, REF),
    _one("no_args_vs_some_args", [("now", None)], [("now", {"tz": "UTC"})], REF, REF),
    _one("no_args_in_order", [("now", None)], [W, ("now", {})], REF, REF, match="IN_ORDER"),
    _one("no_args_any_order", [("now", None), W], [W, ("now", None)], REF, REF, match="ANY_ORDER"),
    _one("no_args_ignore_args", [("now", None)], [("now", {})], REF, REF, ignore_args=True),
    _one("unicode_arg", [("find", {"city": "Tromsø"})], [("find", {"city": "Tromsø"})], REF, REF),
    _one("nfc_vs_nfd_arg", [("find", {"city": "Tromsø"})], [("find", {"city": "Tromso\u0338"})], REF, REF),
    _one("no_tools_expected_none", [], [], REF, REF),
    _one("no_tools_expected_one_exact", [], [W], REF, REF),
    _one("no_tools_expected_one_in_order", [], [W], REF, REF, match="IN_ORDER"),
    # --- multi-turn: one score per invocation, averaged
    _case("multi_turn_half", [([W], REF), ([B], "Booked SK123.")], [([W], REF), ([], "I could not book.")]),
    _case(
        "multi_turn_three",
        [([W], "Rain."), ([F], "Three days of rain."), ([], "Bye!")],
        [([W], "Rain today."), ([F, B], "Rain for three days."), ([], "Goodbye!")],
        match="IN_ORDER",
    ),
    # --- responses: stemming, clipping, case and punctuation, Unicode, empty references
    _one("stemming", [], [], "The dogs were running quickly", "the dog runs quick"),
    _one("stemming_irregular", [], [], "skies dying generously", "sky die generous"),
    _one("clipped_counts", [], [], "the cat sat", "the the the cat"),
    _one("punctuation_case", [], [], "Hello, WORLD! It's 12:30.", "hello world its 12 30"),
    _one("nfkc_ligature_fullwidth", [], [], "ﬁle １２３ ＡＢＣ", "file 123 abc"),
    _one("accents", [], [], "café naïve résumé", "cafe naive resume"),
    _one("decomposed_accents", [], [], "café", "cafe\u0301"),
    _one("german", [], [], "Die Straße ist groß", "die strasse ist gross"),
    _one("cjk", [], [], "今天天气很好", "今天天气不好"),
    _one("japanese_korean", [], [], "東京は晴れです 서울은 맑음", "東京は雨です 서울은 맑음"),
    _one("thai", [], [], "สวัสดีครับ", "สวัสดีค่ะ"),
    _one("cyrillic_greek", [], [], "Погода хорошая αβγ", "погода плохая αβγ"),
    _one("emoji_and_symbols", [], [], "Sunny ☀️ 25°C", "sunny 25 c"),
    _one("mixed_ascii_unicode_word", [], [], "naïveté running", "naivete runs"),
    _one("numbers_decimals", [], [], "Temperature 12.5 degrees", "temperature 12 5 degree"),
    _one("empty_reference", [], [], "", "Anything at all"),
    _one("missing_reference", [], [], None, "Anything at all"),
    _one("empty_response", [], [], REF, ""),
    _one("both_empty", [], [], "", ""),
    _one("short_words_unstemmed", [], [], "cats ran is was", "cat run is was"),
]

_ADK_SIDE = r"""
import json, sys
from google.adk.evaluation.eval_case import EvalCase, IntermediateData, Invocation
from google.adk.evaluation.eval_config import EvalConfig
from google.adk.evaluation.eval_metrics import EvalMetric, ToolTrajectoryCriterion
from google.adk.evaluation.eval_set import EvalSet
from google.adk.evaluation.final_response_match_v1 import RougeEvaluator
from google.adk.evaluation.trajectory_evaluator import TrajectoryEvaluator
from google.genai import types

cases, evalset_path = json.load(open(sys.argv[1])), sys.argv[2]

def invocation(i, calls, text):
    return Invocation(
        invocation_id=f"inv-{i}",
        user_content=types.Content(role="user", parts=[types.Part(text=f"turn {i}")]),
        final_response=None if text is None else types.Content(role="model", parts=[types.Part(text=text)]),
        intermediate_data=IntermediateData(tool_uses=[types.FunctionCall(name=n, args=a) for n, a in calls]),
    )

out, eval_cases = {}, []
for case in cases:
    expected = [invocation(i, c, t) for i, (c, t) in enumerate(case["expected"])]
    actual = [invocation(i, c, t) for i, (c, t) in enumerate(case["actual"])]
    criterion = ToolTrajectoryCriterion(
        threshold=1.0, match_type=ToolTrajectoryCriterion.MatchType[case["match_type"]], ignore_args=case["ignore_args"]
    )
    metric = EvalMetric(metric_name="tool_trajectory_avg_score", criterion=criterion)
    trajectory = TrajectoryEvaluator(eval_metric=metric)
    rouge = RougeEvaluator(EvalMetric(metric_name="response_match_score", threshold=0.8))
    config = EvalConfig(criteria={"tool_trajectory_avg_score": criterion, "response_match_score": 0.8})
    out[case["id"]] = {
        "trajectory": trajectory.evaluate_invocations(actual, expected).overall_score,
        "response": rouge.evaluate_invocations(actual, expected).overall_score,
        "config": json.loads(config.model_dump_json(exclude_none=True)),
    }
    eval_cases.append(EvalCase(eval_id=case["id"], conversation=expected))
open(evalset_path, "w").write(EvalSet(eval_set_id="side_by_side", eval_cases=eval_cases).model_dump_json(indent=1))
words = json.load(open(sys.argv[3]))
from nltk.stem.porter import PorterStemmer
stemmer = PorterStemmer()
json.dump({"scores": out, "stems": {w: stemmer.stem(w) for w in words}}, sys.stdout)
"""


def _tool_call(name: str, args: dict[str, Any] | None) -> ToolCall:
    return ToolCall(name=name) if args is None else ToolCall(name=name, args=args)


def _execution(case: dict[str, Any]) -> ExecutionResult:
    turns = [
        TurnRecord(turn_index=i, agent_response=text, tool_calls=[_tool_call(n, a) for n, a in calls])
        for i, (calls, text) in enumerate(case["actual"])
    ]
    return ExecutionResult(
        turns=turns,
        tool_calls=[c for t in turns for c in t.tool_calls],
        actual_response=turns[-1].agent_response if turns else "",
    )


def _tracegrade_scores(case: dict[str, Any], eval_set: EvalSet, adk_config: dict[str, Any]) -> dict[str, float]:
    expected = eval_set.get_case(case["id"])
    assert expected is not None
    config = config_from_adk(adk_config, f"<{case['id']} config>")
    seed_rules = CriteriaConfig.model_validate(
        {
            slot: {**cfg.model_dump(exclude_unset=True), "scoring": "tracegrade"}
            for slot, cfg in config.criteria.enabled_slots()
        }
    )
    scores: dict[str, float] = {}
    for prefix, criteria in (("", config.criteria), ("seed_", seed_rules)):
        for criterion in build_criteria(criteria):
            result = criterion.evaluate_sync(_execution(case), expected)  # type: ignore[attr-defined]
            key = "trajectory" if criterion.name == "tool_trajectory_avg_score" else "response"
            scores[prefix + key] = result.score
    return scores


def _vocabulary() -> list[str]:
    """Words to stem: every alphabetic word of tracegrade's sources and docs, plus the cases' words."""
    found: set[str] = set()
    root = Path(__file__).resolve().parent.parent
    for path in [*root.glob("src/**/*.py"), *root.glob("*.md"), *root.glob("docs/**/*.md")]:
        found.update(re.findall(r"[a-z]+", path.read_text(encoding="utf-8", errors="ignore").lower()))
    found.update(["skies", "dying", "agreed", "feed", "bled", "hopping", "falling", "yyyy", "syzygy", "happily"])
    return sorted(w for w in found if len(w) > 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--adk-python", default="/tmp/adkvenv2/bin/python", help="a Python with google-adk")
    parser.add_argument("--markdown", action="store_true", help="one Markdown row per case (for bench/RESULTS.md)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        cases_file, evalset_file, words_file = (
            Path(tmp, "cases.json"),
            Path(tmp, "cases.evalset.json"),
            Path(tmp, "words.json"),
        )
        cases_file.write_text(json.dumps(CASES))
        words = _vocabulary()
        words_file.write_text(json.dumps(words))
        done = subprocess.run(
            [args.adk_python, "-c", _ADK_SIDE, str(cases_file), str(evalset_file), str(words_file)],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            print(done.stderr, file=sys.stderr)
            return 2
        adk = json.loads(done.stdout)
        eval_set = EvalSet.from_file(evalset_file)  # the expected side as ADK wrote it
    rows = []
    for case in CASES:
        theirs = adk["scores"][case["id"]]
        ours = _tracegrade_scores(case, eval_set, theirs["config"])
        rows.append((case["id"], theirs, ours))
    if args.markdown:
        print("| case | trajectory: ADK / adk / seed | response: ADK / adk / seed |")
        print("|---|---|---|")
        for cid, theirs, ours in rows:
            cells = [f"{theirs[m]:.4f} / {ours[m]:.4f} / {ours['seed_' + m]:.4f}" for m in ("trajectory", "response")]
            print(f"| {cid} | {cells[0]} | {cells[1]} |")
    header = f"{'case':32} {'metric':10} {'ADK':>7} {'tg adk':>7} {'tg seed':>7}  agree(adk) agree(seed)"
    print(header)
    print("-" * len(header))
    agree = seed_agree = total = 0
    for cid, theirs, ours in rows:
        for metric in ("trajectory", "response"):
            a, t, s = theirs[metric], ours[metric], ours["seed_" + metric]
            same, seed_same = abs(a - t) < 1e-9, abs(a - s) < 1e-9
            agree += same
            seed_agree += seed_same
            total += 1
            verdicts = f"{'yes' if same else 'NO':10} {'yes' if seed_same else 'no'}"
            print(f"{cid:32} {metric:10} {a:7.4f} {t:7.4f} {s:7.4f}  {verdicts}")
    stem_diffs = [w for w in words if stem(w) != adk["stems"][w]]
    print("-" * len(header))
    print(f"{len(CASES)} cases, {total} scores: scoring='adk' agrees with google-adk on {agree}/{total};")
    print(f"  the seed rules (scoring='tracegrade') agree on {seed_agree}/{total}")
    print(f"Porter stemmer: {len(words) - len(stem_diffs)}/{len(words)} words stemmed as NLTK does {stem_diffs[:10]}")
    return 0 if agree == total and not stem_diffs else 1


if __name__ == "__main__":
    raise SystemExit(main())
