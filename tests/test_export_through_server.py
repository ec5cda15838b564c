"""`tracegrade export` and `sql --format parquet` through a running server write the Parquet a file opened
directly gives: the same column types (timestamps, int32 counts, lists), the same values, for every table."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow.parquet as pq
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TABLES

from .support.store_records import FIXTURES

_TOKEN = "s3cret-token-long-enough"


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_export_through_a_server_writes_the_types_and_values_of_a_direct_export(tmp_path: Path) -> None:
    from .support.server_process import ServerProcess

    path = tmp_path / "store.duckdb"
    code, out, err = run("import", "--store", path, *FIXTURES)
    assert code == 0, out + err
    code, out, err = run("export", "--store", path, "-o", tmp_path / "direct")
    assert code == 0, err
    served = tmp_path / "served" / "store.duckdb"
    served.parent.mkdir()
    shutil.copy(path, served)
    query = "SELECT trace_id, start_time, span_count, [span_count] AS counts FROM traces ORDER BY trace_id"
    code, _, err = run("sql", "--store", path, "--format", "parquet", "-o", tmp_path / "direct.parquet", query)
    assert code == 0, err
    with ServerProcess(served, extra_args=("--token", _TOKEN)):
        code, out, err = run("export", "--store", served, "--token", _TOKEN, "-o", tmp_path / "remote")
        assert code == 0, err
        remote_sql = tmp_path / "remote.parquet"
        code, _, err = run("sql", "--store", served, "--token", _TOKEN, "--format", "parquet", "-o", remote_sql, query)
        assert code == 0, err
    for table in TABLES:
        direct = pq.read_table(tmp_path / "direct" / f"{table}.parquet")
        remote = pq.read_table(tmp_path / "remote" / f"{table}.parquet")
        assert remote.schema.equals(direct.schema), (table, remote.schema, direct.schema)
        assert remote.to_pylist() == direct.to_pylist(), table
    direct_sql, remote_sql_table = pq.read_table(tmp_path / "direct.parquet"), pq.read_table(remote_sql)
    assert remote_sql_table.schema.equals(direct_sql.schema)
    assert remote_sql_table.to_pylist() == direct_sql.to_pylist()
