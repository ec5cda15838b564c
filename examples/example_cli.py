"""The command line the examples share: ``python examples/<name>/run.py [OUT_DIR]``.

Reports go to OUT_DIR (default: a new temporary directory); a one-line tally is printed after the console
report. The script exits 0 even when cases fail, since every example fails one on purpose.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable

from tracegrade import EvalReport


def run_example(evaluate: Callable[[str], Awaitable[EvalReport]], temp_prefix: str) -> EvalReport:
    """Run ``evaluate(out_dir)`` with OUT_DIR from the command line and print how many cases passed."""
    out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix=temp_prefix)
    report = asyncio.run(evaluate(out))
    print(f"\n{report.summary.passed_cases}/{report.summary.total_cases} cases passed; reports in {out}")
    return report
