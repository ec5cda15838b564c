"""A user criterion registered by a plugin module (``plugins:`` in rules.yaml): it checks that the agent
answered, and takes its time doing so (``metadata.seconds``; with ``metadata.release``, until that file
exists, ``seconds`` at most), leaving a ``<trace>.started`` file in ``metadata.marker_dir`` when it begins
so a test can tell that a grading job is in flight; each grading adds a line to it, the grading process's pid.
``write_slow_rules`` writes a worker's rules file that grades with it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import yaml

from tracegrade.criteria.base import SyncCriterion
from tracegrade.criteria.registry import register_criterion
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult


@register_criterion()
class SlowAnsweredCriterion(SyncCriterion):
    name = "slow_answered"
    description = "The agent gave a non-empty answer (slowly)"
    requires_reference = False

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        marker_dir = self.config.metadata.get("marker_dir")
        if marker_dir:
            trace = actual.trace_ids[0] if actual.trace_ids else "unknown"
            with (Path(marker_dir) / f"{trace}.started").open("a", encoding="utf-8") as marker:
                marker.write(f"{os.getpid()}\n")
        seconds = float(self.config.metadata.get("seconds", 0))
        release = self.config.metadata.get("release")
        if release:
            deadline = time.monotonic() + seconds
            while not Path(release).exists() and time.monotonic() < deadline:
                time.sleep(0.05)
        else:
            time.sleep(seconds)
        return self._result(1.0 if actual.actual_response.strip() else 0.0)


def write_slow_rules(
    path: Path,
    markers: Path,
    seconds: float,
    *,
    lease_seconds: float = 2,
    batch_size: int = 10,
    release: Path | None = None,
    max_attempts: int = 3,
) -> Path:
    """Rules for one rule ``answered``: contains_keywords "refund" and this criterion, ``seconds`` slow
    (or until ``release`` exists)."""
    metadata = {"seconds": seconds, "marker_dir": str(markers)} | ({"release": str(release)} if release else {})
    rules = {
        "lease_seconds": lease_seconds,
        "poll_seconds": 0.2,
        "batch_size": batch_size,
        "max_attempts": max_attempts,
        "plugins": [__name__],
        "rules": [
            {
                "name": "answered",
                "settle_seconds": 0,
                "criteria": {"contains_keywords": {"keywords": ["refund"]}},
                "extra_criteria": [{"name": "slow_answered", "config": {"metadata": metadata}}],
            }
        ],
    }
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return path
