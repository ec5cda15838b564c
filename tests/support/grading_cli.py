"""Running tracegrade commands in-process (click's CliRunner) and reading back what they wrote."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from tracegrade.cli.main import cli
from tracegrade.models.config import EvalConfig
from tracegrade.models.results import EvalReport
from tracegrade.store import TraceStore

__all__ = ["eval_runs", "read_report", "run_cli", "write_config"]


def run_cli(*args: str | Path) -> Result:
    """One command, its stdout and stderr kept apart (``result.stderr``)."""
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def write_config(path: Path, config: EvalConfig) -> Path:
    path.write_text(json.dumps(config.model_dump(mode="json", exclude_defaults=True)), encoding="utf-8")
    return path


def read_report(out_dir: Path) -> EvalReport:
    """The single JSON report a grading command wrote into ``out_dir``."""
    (found,) = out_dir.glob("*.json")
    return EvalReport.model_validate_json(found.read_text(encoding="utf-8"))


def eval_runs(store_path: Path) -> list[tuple[Any, ...]]:
    """``(run_id, kind, total, passed)`` of every recorded run (empty when none were ever recorded)."""
    with TraceStore(store_path, read_only=True) as store:
        if not store.query("SELECT count(*) FROM information_schema.tables WHERE table_name = 'eval_runs'").rows[0][0]:
            return []
        return store.query("SELECT run_id, kind, total_cases, passed_cases FROM eval_runs ORDER BY run_id").rows
