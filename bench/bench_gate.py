"""Benchmark: ``tracegrade gate`` and ``tracegrade diff`` end to end on two runs of many cases, run by hand.

Writes a baseline and a candidate run of ``--cases`` cases as ``tracegrade run``/``grade`` leave them: JSON report
files written by the JSON reporter (indented, every part of each case kept), and the same two runs recorded in a
store file (``record_report``). Each case is graded by five criteria (pass/fail ones, one in tenths, a continuous
ROUGE-like one, one with a reason in its details) and carries what a traced agent run records: tool calls with
arguments and results, its trajectory, node visits, messages, one LLM call's details and the final response. About
one case in ten changes between the runs (scores, a tool argument, the response).

Each command runs in a fresh process (``python -m tracegrade.cli.main``) under ``/usr/bin/time``: user + system CPU
seconds and peak RSS, median of ``--runs``. ``--profile`` also runs each command once under cProfile and prints
where its CPU went. ``PYTHONPATH`` is passed on, so an older ``src`` can be timed the same way.

    python bench/bench_gate.py [--cases 100000] [--runs 3] [--commands gate,diff] [--sources files,store] [--profile]
    PYTHONPATH=<an older src> python bench/bench_gate.py --folder DIR ...   # the same runs (kept in DIR), older code
"""

from __future__ import annotations

import argparse
import os
import pstats
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tracegrade.evaluation.run_records import record_report
from tracegrade.models.dataset import ToolCall, TrajectoryStep
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport, NodeDetail, TokenUsage, no_tokens
from tracegrade.reporters.json_reporter import JSONReporter
from tracegrade.store import TraceStore

_TOOLS = ("search_catalog", "get_item", "add_to_cart", "checkout", "lookup_order")
_NODES = ("router", "planner", "tools", "answer")
_WORDS = ("order", "item", "cart", "price", "refund", "shipping", "size", "colour", "stock", "return", "delivery")


def _sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words)).capitalize() + "."


def _calls(rng: random.Random) -> list[ToolCall]:
    return [
        ToolCall(
            name=rng.choice(_TOOLS),
            args={"query": _sentence(rng, 3), "limit": rng.randint(1, 20)},
            result={"items": [{"id": f"sku-{rng.randint(1, 99999)}", "price": rng.randint(100, 9999) / 100}]},
            call_id=f"call_{rng.getrandbits(48):012x}",
            duration_seconds=rng.random(),
            span_id=f"{rng.getrandbits(64):016x}",
        )
        for _ in range(rng.randint(1, 4))
    ]


def _criteria(rng: random.Random, good: float) -> list[CriterionResult]:
    """Five criteria's results; ``good`` is the chance each pass/fail one passes."""
    rouge, tenths = rng.random(), rng.randint(0, 10) / 10
    scores = {
        "tool_name_match": float(rng.random() < good),
        "trajectory": tenths,
        "node_order": float(rng.random() < good),
        "rouge_match": rouge,
        "llm_judge": float(rng.random() < good),
    }
    judge = TokenUsage(input_tokens=812, output_tokens=64, calls=1)
    return [
        CriterionResult(
            criterion=name,
            score=score,
            passed=score >= 0.5,
            threshold=0.5,
            details={"reason": _sentence(rng, 12)} if name == "llm_judge" else {"matched": int(score * 4)},
            token_usage=judge if name == "llm_judge" else no_tokens(),
        )
        for name, score in scores.items()
    ]


def _case(index: int, rng: random.Random, good: float) -> EvalCaseResult:
    calls = _calls(rng)
    visits = ["router", *(rng.choice(_NODES[1:3]) for _ in calls), "answer"]
    question, answer = _sentence(rng, 10), _sentence(rng, 30)
    criteria = _criteria(rng, good)
    agent = TokenUsage(input_tokens=rng.randint(500, 3000), output_tokens=rng.randint(50, 400), calls=len(calls) + 1)
    return EvalCaseResult.success(
        f"case-{index:06d}",
        criteria,
        name=f"checkout question {index}",
        actual_tool_calls=calls,
        actual_trajectory=[
            *(TrajectoryStep.node(v) for v in visits),
            *(TrajectoryStep.tool(c.name, c.args) for c in calls),
        ],
        actual_response=answer,
        node_visits=visits,
        messages=[{"role": "user", "content": question}, {"role": "assistant", "content": answer}],
        node_details=[
            NodeDetail(
                node_name="answer",
                input_messages=[{"role": "user", "content": question}],
                response_text=answer,
                token_usage=agent,
                model="gpt-4o-mini",
            )
        ],
        duration_seconds=rng.random() * 5,
        agent_token_usage=agent,
        trace_ids=[f"{rng.getrandbits(128):032x}"],
    )


def make_reports(cases: int, seed: int = 11, changed: float = 0.1) -> tuple[EvalReport, EvalReport]:
    """A baseline and a candidate of ``cases`` cases; a ``changed`` share is graded again (new trajectory and
    scores, a little worse on the whole) in the candidate, the rest is the baseline's result as it is."""
    rng = random.Random(seed)
    base, cand = [], []
    for index in range(cases):
        before = _case(index, rng, 0.85)
        base.append(before)
        cand.append(_case(index, rng, 0.75) if rng.random() < changed else before)
    return EvalReport.create("bench-gate", base, "checkout"), EvalReport.create("bench-gate", cand, "checkout")


def write_runs(folder: Path, cases: int) -> dict[str, tuple[str, str]]:
    """The two runs as report files and as runs recorded in ``folder/store.duckdb``: references by source."""
    baseline, candidate = make_reports(cases)
    files = folder / "baseline.json", folder / "candidate.json"
    for report, path in zip((baseline, candidate), files):
        JSONReporter().save(report, path)
    with TraceStore(folder / "store.duckdb") as store:
        record_report(store, baseline, "eval_set", "run-baseline")
        record_report(store, candidate, "eval_set", "run-candidate")
    return {"files": (str(files[0]), str(files[1])), "store": ("run-baseline", "run-candidate")}


def _arguments(command: str, refs: tuple[str, str], folder: Path) -> list[str]:
    store = ["--store", str(folder / "store.duckdb")]
    if command == "gate":
        return ["gate", *store, "--baseline", refs[0], "--candidate", refs[1], "--out", str(folder / "out")]
    return ["diff", *store, refs[0], refs[1], "--format", "json"]


def _timed(arguments: list[str], folder: Path) -> tuple[float, float]:
    """CPU seconds (user + system) and peak RSS in MB of one run of the command."""
    usage = folder / "time.txt"
    command = ["/usr/bin/time", "-o", str(usage), "-f", "%U %S %M", sys.executable, "-m", "tracegrade.cli.main"]
    done = subprocess.run([*command, *arguments], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(arguments)} exited {done.returncode}: {done.stderr.decode()[-2000:]}")
    user, system, peak_kb = usage.read_text().split()[-3:]
    return float(user) + float(system), int(peak_kb) / 1024


def _profile(arguments: list[str], folder: Path, top: int) -> None:
    """Run the command once under cProfile and print the functions with the most cumulative time."""
    out = folder / "profile.out"
    command = [sys.executable, "-m", "cProfile", "-o", str(out), "-m", "tracegrade.cli.main", *arguments]
    subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    pstats.Stats(str(out)).sort_stats("cumulative").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--commands", default="gate,diff")
    parser.add_argument("--sources", default="files,store")
    parser.add_argument("--profile", action="store_true", help="also print cProfile's top functions per command")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--folder", type=Path, help="keep the runs here (reused when already written)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tracegrade_bench_gate_") as scratch:
        folder = args.folder or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        marker = folder / f"written-{args.cases}"
        if marker.exists():
            refs = {"files": (str(folder / "baseline.json"), str(folder / "candidate.json"))}
            refs["store"] = ("run-baseline", "run-candidate")
        else:
            for stale in ("store.duckdb", "store.duckdb.wal"):
                (folder / stale).unlink(missing_ok=True)
            refs = write_runs(folder, args.cases)
            marker.touch()
        size = os.path.getsize(refs["files"][0]) / 1e6
        print(f"{args.cases} cases, report files of {size:.1f} MB; PYTHONPATH={os.environ.get('PYTHONPATH', '')}")
        if args.runs < 1:  # --runs 0 --folder DIR: only write the runs, to time them later
            return
        for source in args.sources.split(","):
            for command in args.commands.split(","):
                arguments = _arguments(command, refs[source], folder)
                runs = [_timed(arguments, folder) for _ in range(args.runs)]
                cpu = [c for c, _ in runs]
                rss = [r for _, r in runs]
                print(
                    f"  {command} from {source}: {statistics.median(cpu):.2f} CPU s "
                    f"({', '.join(f'{c:.2f}' for c in cpu)}), peak RSS {statistics.median(rss):.0f} MB "
                    f"({', '.join(f'{r:.0f}' for r in rss)})",
                    flush=True,
                )
                if args.profile:
                    _profile(arguments, folder, args.top)


if __name__ == "__main__":
    main()
