"""Peak memory of one capped store query over wide rows (run by hand; a fresh process per measurement).

A query of 1,000,000 rows, each a ``width``-byte string, read through ``TraceStore.query`` with the web UI's caps
(1,000 rows, 8 MiB); prints the rows returned, the growth of the process's peak resident set and the wall time.

    python bench/bench_capped_query_memory.py 28000
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time

from tracegrade.store import TraceStore
from tracegrade.store.query_control import QueryControl


def main(width: int) -> None:
    with TraceStore(tempfile.mkdtemp() + "/s.duckdb") as store:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        started = time.perf_counter()
        result = store.query(
            f"SELECT i, repeat('x', {width}) AS v FROM range(1000000) t(i)",
            control=QueryControl(max_rows=1000, max_bytes=8 * 2**20),
        )
        grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024
        print(f"width {width}: {len(result.rows)} rows, peak grew {grown} MB, {time.perf_counter() - started:.2f} s")


if __name__ == "__main__":
    main(int(sys.argv[1]))
