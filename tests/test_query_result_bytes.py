"""A result's size is capped, not only its row count: a few huge values (texts of 10 MB) would otherwise
fill the receiver's memory with Python strings and JSON text. Through a real ``tracegrade serve`` the answer is cut
at ``--query-max-bytes`` and says so, the store commands refuse the cut result naming the flag, and the receiver
keeps serving; the UI's SQL page and MCP's ``run_sql`` read at most ``SQL_BYTE_LIMIT``."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

from tests.support.grading_cli import run_cli
from tests.support.long_text import long_text_sql
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query
from tracegrade.store import TraceStore
from tracegrade.store.query_control import QueryControl, value_bytes
from tracegrade.ui import api

MB = 1024 * 1024
HUGE = f"SELECT i, {long_text_sql(1_000_000)} AS big FROM range(40) t(i) ORDER BY i"  # 40 values of 1 MB


def _post_query(url: str, sql: str) -> dict:
    request = urllib.request.Request(
        f"{url}/v1/query", json.dumps({"sql": sql}).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=120) as reply:
        return json.loads(reply.read())


def test_the_receiver_cuts_an_answer_at_its_byte_cap_and_keeps_serving(tmp_path: Path) -> None:
    store = tmp_path / "s.duckdb"
    with ServerProcess(store, extra_args=("--query-max-bytes", "4MB")) as server:
        answer = _post_query(server.http_url, HUGE)
        assert answer["truncated"] is True and answer["max_bytes"] == 4 * MB
        assert [row[0] for row in answer["rows"]] == [0, 1, 2, 3]  # whole rows, in order, up to the cap
        assert all(len(row[1]) == 1_000_000 for row in answer["rows"])
        small = _post_query(server.http_url, "SELECT i FROM range(5000) t(i)")  # many small rows are not cut
        assert small["truncated"] is False and len(small["rows"]) == 5000 and "max_bytes" not in small
        # a store command reading through the server refuses the cut result rather than work on part of it
        refused = run_cli("sql", "--store", store, HUGE)
        assert refused.exit_code != 0
        assert "--query-max-bytes" in refused.stderr and "4,194,304 bytes" in refused.stderr
        assert query(server.http_url, "SELECT 1") == [[1]]


def test_the_receivers_ui_sql_page_is_held_to_the_smaller_cap(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "s.duckdb", extra_args=("--query-max-bytes", "2MB")) as server:
        address = f"{server.http_url}/ui/api/sql?q={urllib.request.quote(HUGE)}"
        with urllib.request.urlopen(address, timeout=120) as reply:
            answer = json.loads(reply.read())
    assert answer["truncated"] is True and answer["max_bytes"] == 2 * MB and answer["row_count"] == 2


def test_ad_hoc_sql_reads_at_most_its_byte_limit(tmp_path: Path) -> None:
    with TraceStore(tmp_path / "s.duckdb") as store:
        cut = api.run_sql(store, f"SELECT {long_text_sql(1_000_000, 'y')} FROM range(100)")
        assert cut["truncated"] is True and cut["max_bytes"] == api.SQL_BYTE_LIMIT
        assert 0 < cut["row_count"] <= api.SQL_BYTE_LIMIT // 1_000_000
        by_rows = api.run_sql(store, "SELECT i FROM range(5000) t(i)")  # the row cap still applies on its own
        assert by_rows["truncated"] is True and by_rows["row_count"] == api.SQL_ROW_LIMIT
        assert by_rows["max_bytes"] is None
        whole = store.query("SELECT i FROM range(3) t(i)", control=QueryControl(max_rows=3, max_bytes=MB))
        assert whole.rows == [(0,), (1,), (2,)] and not whole.truncated
        # a first row larger than the cap comes back as none, marked cut, rather than over the cap
        none = store.query("SELECT repeat('z', 100000)", control=QueryControl(max_bytes=1024))
        assert none.rows == [] and none.truncated and none.max_bytes == 1024


def test_the_size_estimate_follows_nested_values() -> None:
    assert value_bytes("abc") == 5 and value_bytes(b"\x00" * 300) == 404
    nested = {"k": ["x" * 1000, {"inner": "y" * 500}], "n": 3}
    assert value_bytes(nested) > 1500
    assert value_bytes([dt.date(2026, 1, 1), None, 1.5, True]) == 4 * 8 + 2


# A store query capped at 1 MB over 10,000 values of 100 KB (1 GB in all), in a process of its own; prints the peak
# resident set in MB. Without a small streaming buffer DuckDB 1.x built every row before the first fetch.
_PEAK_OF_CAPPED_QUERY = textwrap.dedent(
    """
    import resource, sys
    from tracegrade.store import TraceStore
    from tracegrade.store.query_control import QueryControl

    with TraceStore(sys.argv[1]) as store:
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        result = store.query(
            "SELECT i, repeat('x', 100000) AS v FROM range(10000) t(i)",
            control=QueryControl(max_rows=1000, max_bytes=1_000_000),
        )
        assert result.max_bytes == 1_000_000 and len(result.rows) == 9, result.rows[:1]
        print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
    """
)


def test_a_capped_query_builds_about_one_chunk_of_wide_rows_not_the_whole_result(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PEAK_OF_CAPPED_QUERY, str(tmp_path / "s.duckdb")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    grown_mb = int(done.stdout.strip())
    # one chunk of 2,048 such rows is 200 MB; the whole result would be 1,000 MB
    assert grown_mb < 500, f"the capped query grew the process by {grown_mb} MB"
