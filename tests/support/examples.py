"""Running an example as the README documents it: ``python examples/<name>/run.py OUT_DIR``."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

__all__ = ["EXAMPLES", "run_example"]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(example: str, out: Path, env: Mapping[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``example`` offline, writing into ``out`` (its working directory is ``out``'s parent), with no
    ``OTEL_*`` variable but those in ``env``; the test fails unless it exits 0."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / example / "run.py"), str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        env={**clean, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_COLOR": "1", **(env or {})},
        cwd=out.parent,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done
