"""Peak memory of one "built value" bomb through ``TraceStore.query`` with a 5 s time limit (run by hand; a fresh
process per measurement, as a bomb's peak stays in the process).

``--without-size-rules`` runs the gate as it was before ``store/built_values.py`` (its check does nothing), to see
what the bomb costs when it runs; mind the machine's memory (``repeat('x', 2000000000)`` takes about 4 GB).

    python bench/bench_built_value_peak.py "SELECT len(range(30000000))" [--without-size-rules]
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time

from tracegrade.errors import StoreError
from tracegrade.store import TraceStore
from tracegrade.store.built_values import BuiltValues
from tracegrade.store.query_control import QueryControl


def main(sql: str, size_rules: bool) -> None:
    if not size_rules:
        BuiltValues.check = lambda self, node: None  # type: ignore[method-assign]
    with TraceStore(tempfile.mkdtemp() + "/s.duckdb") as store:
        started = time.perf_counter()
        try:
            store.query(sql, control=QueryControl(5.0))
            outcome = "ran to the end"
        except StoreError as exc:
            outcome = f"{type(exc).__name__}: {str(exc)[:80]}"
        took = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
    print(f"{sql!r}: {outcome}; {took:.1f} s; peak RSS {peak} MB")


if __name__ == "__main__":
    main(sys.argv[1], "--without-size-rules" not in sys.argv[2:])
