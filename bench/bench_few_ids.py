"""Benchmark: reading the wide columns of a few traces' rows, ``IN`` list against ``sql_string_among``.

On the offline-grading benchmark's store (``bench_offline_grading.py`` builds and caches it: 100,000 traces,
700,000 spans), times the queries that read a few traces' rows, for ``--ids`` random trace ids each: the loading
query of ``iter_executions`` (``traces.lean_execution``, what a worker's batch loads) and the SQL assertion's reads
of ``spans`` and ``traces`` (every column, for the traces of one conversation). Each query is written both ways:
``trace_id IN (…)``, and the predicate ``sql_string_among`` writes (``list_contains`` over the literal list up to
``LONG_STRING_LIST`` ids). Milliseconds per query, median of ``--repeats``, on a warm store.

    python bench/bench_few_ids.py [--traces 100000] [--ids 2,5,20,50,100] [--repeats 7]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import duckdb

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))

from bench_offline_grading import DEFAULT_STORE, _stored_traces, build_store  # noqa: E402

from tracegrade.store.rows import sql_string_among, sql_string_list  # noqa: E402

QUERIES = {
    "loading (lean_execution)": "SELECT trace_id, tenant, lean_execution FROM traces WHERE {}",
    "sql assertion: spans": "SELECT * FROM spans WHERE {}",
    "sql assertion: traces": "SELECT * FROM traces WHERE {}",
}


def median_ms(con: duckdb.DuckDBPyConnection, sql: str, params: list[str], repeats: int) -> float:
    con.execute(sql, params).fetchall()  # warm
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        con.execute(sql, params).fetchall()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=100_000)
    parser.add_argument("--ids", default="2,5,20,50,100", help="comma-separated numbers of trace ids")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    source = DEFAULT_STORE.with_name(f"{DEFAULT_STORE.stem}_{args.traces}.duckdb")
    if _stored_traces(source) != args.traces:
        print(f"building {source} with {args.traces:,} traces (cached for later runs)…", file=sys.stderr)
        build_store(source, args.traces)
    con = duckdb.connect(str(source), read_only=True)
    print(f"{'query':28} {'ids':>4} {'IN list':>9} {'among':>9}   ms per query, median of {args.repeats}")
    for count in (int(n) for n in args.ids.split(",")):
        ids = [row[0] for row in con.execute(f"SELECT trace_id FROM traces USING SAMPLE {count} ROWS").fetchall()]
        among, params = sql_string_among("trace_id", ids)
        for name, template in QUERIES.items():
            plain = median_ms(con, template.format(f"trace_id IN {sql_string_list(ids)}"), [], args.repeats)
            chosen = median_ms(con, template.format(among), params, args.repeats)
            print(f"{name:28} {count:>4} {plain:9.1f} {chosen:9.1f}")
    con.close()


if __name__ == "__main__":
    main()
