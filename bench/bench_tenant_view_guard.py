"""Benchmark: what a tenant's query pays on a lake for views that blank other tenants' columns.

On a lake, a tenant's view shows each column only on the tenant's rows (``CASE WHEN tenant = … THEN col END``), so
that DuckDB 1.5's Parquet reader cannot run a query's failing cast on another tenant's values; the query's own
filters then no longer narrow the scan. This builds a lake of ``--spans`` spans (half of them the measured
tenant's, in one commit, so both tenants share Parquet files), runs four typical queries as that tenant (and one
naming three tables never written to) with the guard off and on, and as no tenant (what the tenant's views add is the
difference), alternated ``--runs`` times, and prints each one's median in milliseconds.

    TRACEGRADE_TEST_PG_DSN="host=127.0.0.1 port=5432 user=postgres dbname=postgres" \\
        python bench/bench_tenant_view_guard.py [--spans 1000000] [--runs 5]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import psycopg

from tracegrade.store.lake import LakeStore

TENANT = "acme"


def _column_value(name: str, sql_type: str) -> str:
    """SQL for the column ``name`` of span ``i``: tenants alternate, 20 spans a trace."""
    if name == "tenant":
        return f"CASE WHEN i % 2 = 0 THEN '{TENANT}' ELSE 'globex' END"
    if name == "trace_id":
        return "lpad((i // 20)::VARCHAR, 32, '0')"
    if name == "span_id":
        return "lpad(i::VARCHAR, 16, '0')"
    if sql_type.startswith("VARCHAR"):
        return "'v' || (i % 100)"
    if sql_type == "JSON":
        return """'{"a": 1}'"""
    if sql_type.startswith("TIMESTAMP"):
        return "TIMESTAMP '2026-01-01' + to_seconds(i)"
    if sql_type in ("BIGINT", "INTEGER", "DOUBLE"):
        return "i"
    return f"NULL::{sql_type}"


def _queries(spans: int) -> dict[str, tuple[str, list[str] | None]]:
    trace = f"{(spans // 2) // 20:032d}"
    return {
        "lookup by trace id": ("SELECT count(*), max(name) FROM spans WHERE trace_id = ?", [trace]),
        "one span": ("SELECT * FROM spans WHERE trace_id = ? AND span_id = ?", [trace, f"{(spans // 40) * 20:016d}"]),
        "count": ("SELECT count(*) FROM spans", None),
        "50 most recent traces": (
            "SELECT trace_id, max(start_time) FROM spans GROUP BY 1 ORDER BY 2 DESC LIMIT 50",
            None,
        ),
        # tables never written to: DuckLake plans a scan of one with two catalog round trips per column
        "three empty tables": (
            "SELECT (SELECT count(*) FROM traces), (SELECT count(*) FROM tool_calls), (SELECT count(*) FROM llm_calls)",
            None,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    dsn = os.environ["TRACEGRADE_TEST_PG_DSN"]
    database = f"bench_guard_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {database}")
    try:
        conninfo = re.sub(r"\s*\bdbname\s*=\s*\S+", "", dsn).strip() + f" dbname={database}"
        store = LakeStore(f"ducklake:postgres:{conninfo}", data_path=Path(tempfile.mkdtemp()) / "data")
        columns = store.query(
            "SELECT column_name, data_type FROM duckdb_columns() WHERE table_name = 'spans' AND schema_name = 'raw'"
        ).rows
        values = ", ".join(f"{_column_value(name, sql_type)} AS {name}" for name, sql_type in columns)
        store.execute_write(f"INSERT INTO raw.spans BY NAME SELECT {values} FROM range({args.spans}) r(i)")
        timings: dict[tuple[str, str], list[float]] = {}
        modes = {"guard off": (False, TENANT), "guard on": (True, TENANT), "no tenant": (True, None)}
        for _ in range(args.runs):
            for mode, (guard, tenant) in modes.items():
                LakeStore._scan_filters_run_early = guard
                for label, (sql, params) in _queries(args.spans).items():
                    store.query(sql, params, tenant=tenant)  # warm
                    start = time.perf_counter()
                    store.query(sql, params, tenant=tenant)
                    timings.setdefault((label, mode), []).append((time.perf_counter() - start) * 1000)
        store.close()
        headings = " | ".join(f"{mode}, ms" for mode in modes)
        print(f"| {TENANT}'s query ({args.spans:,} spans, half its own) | {headings} |")
        print("|---" * (len(modes) + 1) + "|")
        for label in _queries(args.spans):
            medians = (statistics.median(timings[(label, mode)]) for mode in modes)
            print(f"| {label} | " + " | ".join(f"{median:.0f}" for median in medians) + " |")
    finally:
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {database} WITH (FORCE)")


if __name__ == "__main__":
    main()
