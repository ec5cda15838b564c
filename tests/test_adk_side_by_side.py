"""ADK-compatible scoring against google-adk's own evaluators, side by side (bench/adk_side_by_side.py): every
case's trajectory and response scores agree, and the Porter stemmer stems as NLTK's does. Needs google-adk with
rouge-score and nltk (ADK's response evaluator): skipped without them; CI runs it in its agents venv (.ci/run).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("google.adk")
pytest.importorskip("rouge_score")
pytest.importorskip("nltk")

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "adk_side_by_side.py"


def test_adk_scoring_agrees_with_google_adk_on_every_case() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--adk-python", sys.executable],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    agreed = re.search(r"(\d+) cases, (\d+) scores: scoring='adk' agrees with google-adk on (\d+)/(\d+);", done.stdout)
    assert agreed is not None, done.stdout[-2000:]
    cases, scores, agree, total = map(int, agreed.groups())
    assert cases >= 40 and scores == total == agree, done.stdout[-4000:]
