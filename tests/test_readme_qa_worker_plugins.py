"""The README's worker rules, followed as a new user would: ``plugins: [my_company.criteria]`` names a module of
the project the user runs ``tracegrade`` in, and the real ``tracegrade`` console script (which, unlike
``python -m``, puts no current directory on ``sys.path``) must find it, for ``validate`` and for the worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.store import TraceStore

PLUGIN = """
from tracegrade import SyncCriterion, register_criterion


@register_criterion()
class ReplyLength(SyncCriterion):
    name = "qa_reply_length"
    requires_reference = False
    reads = frozenset({"actual_response"})

    def evaluate_sync(self, actual, expected):
        return self._result(1.0 if len(actual.actual_response) <= 500 else 0.0, {})
"""

RULES = {
    "rules": [
        {
            "name": "replies",
            "where": "service_name = 'support-bot'",
            "settle_seconds": 0,
            "criteria": {"contains_keywords": {"keywords": ["refund"], "threshold": 1.0}},
            "extra_criteria": [{"name": "qa_reply_length"}],
        }
    ],
    "plugins": ["qa_company.criteria"],
}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A user's project: the plugin package, the rules naming it, and a store holding one settled trace."""
    package = tmp_path / "qa_company"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "criteria.py").write_text(PLUGIN)
    (tmp_path / "rules.json").write_text(json.dumps(RULES))
    fill_store(tmp_path / "traces.duckdb", [AgentRun(1, "Can I get a refund?", "Your refund is on its way.")]).close()
    return tmp_path


def tracegrade(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed console script, run in the project directory."""
    script = Path(sys.executable).with_name("tracegrade")
    assert script.exists(), f"the tracegrade console script is not installed beside {sys.executable}"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH" and not k.startswith("TRACEGRADE_")}
    return subprocess.run(
        [str(script), *args], cwd=project, env=env, capture_output=True, text=True, timeout=180, check=False
    )


def test_validate_finds_a_plugin_in_the_current_directory(project: Path) -> None:
    done = tracegrade(project, "validate", "rules.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok" in done.stdout and "cannot import" not in done.stdout


def test_the_worker_grades_with_a_plugin_criterion_from_the_current_directory(project: Path) -> None:
    done = tracegrade(project, "worker", "--rules", "rules.json", "--store", "traces.duckdb", "--once")
    assert done.returncode == 0, done.stdout + done.stderr
    with TraceStore(project / "traces.duckdb", read_only=True) as store:
        graded = store.query("SELECT criterion, passed FROM eval_results ORDER BY criterion").rows
    assert graded == [("contains_keywords", True), ("qa_reply_length", True)]
