"""Progress bars of long commands: shown on a terminal's stderr (a real pseudo-terminal), never in a pipe."""

from __future__ import annotations

import json
import os
import pty
import re
import select
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.grading_cli import write_config
from tests.support.grading_traces import AgentRun, fill_store
from tests.support.store_records import FIXTURES
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig

# What a bar draws: the task's description and a "done/total" counter (rich's MofNCompleteColumn).
BAR = {
    "grade": re.compile(r"grading.*\d+/\d+ cases"),
    "import": re.compile(r"decoding.*\d+/\d+ files|mapping \d+ traces"),
    "export": re.compile(r"exporting.*\d+/\d+ tables"),
    "export-cases": re.compile(r"exporting cases"),
}
# whole words: an exported table's name (grading_jobs) is not a bar
ANY_BAR = re.compile(r"\b(grading|decoding|exporting)\b|mapping \d+ traces|\d+/(\d+|\?) (cases|files|tables|traces)")
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "FORCE_COLOR")}
    env.update(TERM="xterm-256color", COLUMNS="120")
    return env


def _cli(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "tracegrade.cli.main", *map(str, args)]


def run_on_terminal(args: list[str], cwd: Path, **env: str) -> tuple[int, str, str]:
    """Run with stderr on a pseudo-terminal and stdout on a pipe: (exit code, stdout, terminal output)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        args, cwd=cwd, env={**_env(), **env}, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave
    )
    os.close(slave)
    seen = bytearray()
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            proc.kill()
            raise AssertionError(f"no output for 60 s from {args}")
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal (EIO on Linux)
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    out = proc.stdout.read().decode() if proc.stdout else ""
    return proc.wait(timeout=60), out, ANSI.sub("", seen.decode(errors="replace"))


def run_piped(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("progress")
    runs = [AgentRun(i, f"track order {i}", f"order {i} ships today", [("track", {"order": i})]) for i in range(1, 6)]
    fill_store(root / "store.duckdb", runs).close()
    config = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig(keywords=["order"])))
    write_config(root / "config.json", config)
    return root


def _commands(root: Path) -> dict[str, list[str]]:
    store = root / "store.duckdb"
    return {
        "grade": _cli("grade", "--store", store, "--config", root / "config.json", "--out", root / "r", "--no-record"),
        "import": _cli("import", "--store", root / "imported.duckdb", *FIXTURES[:2]),
        "export": _cli("export", "--store", store, "-o", root / "parquet"),
        "export-cases": _cli("export-cases", "--store", store, "-o", root / "cases.json"),
    }


@pytest.mark.parametrize("command", list(BAR))
def test_a_terminal_shows_the_bar(workdir: Path, command: str) -> None:
    code, out, terminal = run_on_terminal(_commands(workdir)[command], workdir)
    assert code == 0, out + terminal
    assert BAR[command].search(terminal), terminal
    assert not ANY_BAR.search(out)  # stdout is a pipe here: the bar never goes there


@pytest.mark.parametrize("command", list(BAR))
def test_piped_output_has_no_progress_text(workdir: Path, command: str) -> None:
    done = run_piped(_commands(workdir)[command], workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not ANY_BAR.search(done.stderr), done.stderr
    assert not ANY_BAR.search(done.stdout) and "\x1b[" not in done.stderr + done.stdout


def test_ci_environment_gets_no_bar_even_on_a_terminal(workdir: Path) -> None:
    code, _, terminal = run_on_terminal(_commands(workdir)["export"], workdir, CI="true")
    assert code == 0 and not ANY_BAR.search(terminal), terminal


def test_export_cases_output_is_unchanged_by_the_bar(workdir: Path) -> None:
    code, _, _ = run_on_terminal(_commands(workdir)["export-cases"], workdir)
    assert code == 0
    cases = json.loads((workdir / "cases.json").read_text())["eval_cases"]
    assert len(cases) == 5
