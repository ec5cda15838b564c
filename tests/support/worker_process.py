"""A real ``tracegrade worker`` process serving its metrics (``--metrics-address 127.0.0.1:0``), and readers of
its ``/metrics`` and ``/healthz``."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.support.server_otlp import get_text
from tests.support.waiting import wait_until
from tracegrade.evaluation.worker import GradingSink, GradingWorker, WorkerRules

__all__ = ["WorkerProcess", "metric_samples", "take_over_after_the_lease"]

REPO = Path(__file__).resolve().parents[2]
LAUNCH = "from tracegrade.cli.main import main; main()"
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')
_URL = re.compile(r"worker metrics on (http://\S+)/metrics")
_GRADING = "grading; stop with Ctrl-C"


def metric_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """A Prometheus text exposition as (sample name, its labels) -> value."""
    samples = {}
    for line in text.splitlines():
        match = _SAMPLE.match(line)
        if match and not line.startswith("#"):
            labels = frozenset(_LABEL.findall(match.group(2) or ""))
            samples[match.group(1), labels] = float(match.group(3))
    return samples


class WorkerProcess:
    """``tracegrade worker --rules RULES --store STORE *extra --metrics-address 127.0.0.1:0``, its output in
    ``log``; entered once it serves its metrics, stopped with SIGTERM (and killed if that does not stop it)."""

    def __init__(self, rules: Path, store: str | Path, log: Path, *extra: str) -> None:
        self.args = ["worker", "--rules", str(rules), "--store", str(store), *extra]
        self.log = log
        self.url = ""
        self.process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> WorkerProcess:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACEGRADE_")}
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-c", LAUNCH, *self.args, "--metrics-address", "127.0.0.1:0"],
                cwd=REPO,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        # grading starts once the worker handles SIGTERM (the URL comes before): a stop then is a clean one
        wait_until(lambda: _GRADING in self.output() or self.process.poll() is not None, "the worker to grade", 120)
        found = _URL.search(self.output())
        assert found, self.output()
        self.url = found.group(1)
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    def stop(self) -> int:
        """SIGTERM, then the exit status (SIGKILL after a minute)."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(30)
        return int(self.process.returncode)

    def output(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def metrics_text(self) -> str:
        status, text = get_text(f"{self.url}/metrics")
        assert status == 200, text
        return text

    def metric(self, name: str, **labels: str) -> float:
        """One sample of /metrics (0 when it is not there yet)."""
        return metric_samples(self.metrics_text()).get((name, frozenset(labels.items())), 0.0)

    def health(self) -> tuple[int, dict[str, Any]]:
        status, text = get_text(f"{self.url}/healthz")
        return status, json.loads(text)


def take_over_after_the_lease(store: GradingSink, rule: str = "answered") -> tuple[GradingWorker, GradingWorker]:
    """Two workers on ``store`` (holding one settled trace of the default tenant whose reply mentions a refund):
    ``slow`` claims its job and grades it only after its lease ran out and ``quick`` took the job over and
    finished it. Returns (slow, quick); the job is done, by ``quick``."""
    rules = WorkerRules.model_validate(
        {
            "lease_seconds": 0.5,
            "rules": [{"name": rule, "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["refund"]}}}],
        }
    )
    slow, quick = GradingWorker(store, rules, worker_id="slow"), GradingWorker(store, rules, worker_id="quick")
    assert slow.enqueue() == 1
    (job,) = slow.claim()
    # the quick worker finds nothing to claim until the slow one's lease ran out (by the queue's clock)
    wait_until(lambda: asyncio.run(quick.run_once()) == 1, "the quick worker to take the job over", interval=0.1)
    asyncio.run(slow.run_jobs([job]))
    rows = store.query("SELECT status, owner, run_id IS NOT NULL FROM grading_jobs").rows
    assert [tuple(row) for row in rows] == [("done", None, True)], rows
    return slow, quick
