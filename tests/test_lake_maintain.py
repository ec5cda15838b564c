"""``tracegrade maintain`` on a real lake: small files merged and old ones deleted, nothing lost, also while
another process writes; a file store is refused."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support import pg_cluster
from tests.support.pg_cluster import PgServer
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_until
from tracegrade.cli.main import cli
from tracegrade.models.span import SpanRecord
from tracegrade.store import StoreWriter
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

SPANS_PER_COMMIT = 20  # above DuckLake's inlining limit: every commit writes a Parquet file


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> tuple[str, Path]:
    return f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"


def _spans(trace: int) -> list[SpanRecord]:
    root = trace * 1000
    spans = [make_span(trace, root, name="agent", attributes={"gen_ai.operation.name": "invoke_agent"})]
    spans += [
        make_span(trace, root + n, parent=root, name="search", attributes={"gen_ai.tool.name": "search"})
        for n in range(1, SPANS_PER_COMMIT)
    ]
    return spans


def _commit(store: LakeStore, trace: int) -> None:
    store.write(_spans(trace))


def _parquet_files(data: Path) -> int:
    return sum(1 for _ in data.rglob("*.parquet"))


def _contents(location: str) -> dict[str, list[tuple]]:
    """Every count that maintenance must leave as it was."""
    with LakeStore(location, read_only=True) as reader:
        return {
            sql: reader.query(sql).rows
            for sql in (
                "SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM raw.spans",
                "SELECT trace_id, count(*) FROM spans GROUP BY ALL ORDER BY ALL",
                "SELECT trace_id, span_count, tool_calls FROM traces ORDER BY ALL",
                "SELECT count(*) FROM tool_calls",
            )
        }


def _maintain(location: str, data: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["maintain", "--store", location, "--lake-data", str(data), *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_maintain_merges_small_files_and_deletes_the_old_ones(lake: tuple[str, Path]) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        for trace in range(1, 31):
            _commit(store, trace)
        store.rebuild_trajectories([trace_hex(t) for t in range(1, 31)])
        store.rebuild_trajectories([trace_hex(t) for t in range(1, 11)])  # a remap deletes rows: files to rewrite
    before_files = _parquet_files(data)
    assert before_files >= 30
    before = _contents(location)

    kept = _maintain(location, data)  # default --keep 15m: the replaced files are still some snapshot's
    assert "merged" in kept
    assert _parquet_files(data) > before_files  # merged files written, none deleted yet
    assert _contents(location) == before

    output = _maintain(location, data, "--keep", "0s")
    after_files = _parquet_files(data)
    assert after_files <= 10, output  # one or two per table
    assert "deleted" in output
    assert _contents(location) == before
    again = _maintain(location, data, "--keep", "0s")  # nothing left to do
    assert "merged 0 file(s)" in again and "deleted 0 unreferenced" in again
    assert _parquet_files(data) == after_files


def test_maintain_while_another_process_writes_loses_nothing(lake: tuple[str, Path], tmp_path: Path) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        _commit(store, 1)  # the lake exists before maintenance opens it
    log = tmp_path / "maintain.out"
    command = [sys.executable, "-m", "tracegrade.cli.main", "maintain", "--store", location, "--lake-data", str(data)]
    with log.open("w") as out:
        maintainer = subprocess.Popen([*command, "--every", "0.2s", "--keep", "0s"], stdout=out, stderr=out)
    passes = lambda: log.read_text().count("live data files")  # noqa: E731
    try:
        wait_until(lambda: passes() >= 1 or maintainer.poll() is not None, "a first maintenance pass", timeout=120)
        assert maintainer.poll() is None, log.read_text()
        # the receiver's own writer: a commit per batch, trajectories replaced after each trace settles (a
        # replacement that conflicts with a maintenance commit fails and is retried by the writer)
        # each batch committed at once (a lake's writer would gather for a second): 60 commits racing maintenance
        store = LakeStore(location, data_path=data)
        writer = StoreWriter(store, commit_seconds=0, settle_seconds=0.05, root_settle_seconds=0.05)
        writer.start()
        passes_before = passes()
        traces = 1
        # at least 60 more traces, and on until a pass has run between them, however slow the machine
        while traces < 61 or passes() == passes_before:
            traces += 1
            writer.submit(_spans(traces)).result(timeout=120)
            assert maintainer.poll() is None, log.read_text()
        writer.close()  # drains: every trajectory rebuilt
        wait_until(lambda: passes() > passes_before + 1, "a pass after the writes", timeout=120)
    finally:
        maintainer.send_signal(signal.SIGINT)
        maintainer.wait(60)
    assert maintainer.returncode == 0, log.read_text()  # stopped between passes

    _maintain(location, data, "--keep", "0s")
    with LakeStore(location, read_only=True) as reader:
        assert reader.query("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM raw.spans").rows == [
            (traces * SPANS_PER_COMMIT, traces * SPANS_PER_COMMIT)
        ]
        assert reader.query("SELECT count(*), min(span_count) FROM traces").rows == [(traces, SPANS_PER_COMMIT)]
        assert reader.stale_trajectories() == []
    assert _parquet_files(data) <= 10


def _names_in_files(data: Path) -> set[str]:
    """The span names in every Parquet file under the lake's data path, deleted rows included."""
    import duckdb

    names: set[str] = set()
    with duckdb.connect() as con:
        for path in data.rglob("*.parquet"):
            columns = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM read_parquet('{path}')").fetchall()}
            if {"name", "span_id"} <= columns:  # a spans file (not a delete file, nor another table's)
                names |= {row[0] for row in con.execute(f"SELECT DISTINCT name FROM read_parquet('{path}')").fetchall()}
    return names


def test_purge_deleted_removes_a_forgotten_trace_from_every_file_and_keeps_the_rest(lake: tuple[str, Path]) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as store:
        for batch in ((1, 2, 3), (4, 5, 6)):  # several traces per Parquet file
            store.write([make_span(t, t * 100 + n, name=f"user-{t}") for t in batch for n in range(SPANS_PER_COMMIT)])
    forgot = CliRunner().invoke(cli, ["forget", "--store", location, "--lake-data", str(data), trace_hex(1)])
    assert forgot.exit_code == 0 and f"forgot 1 trace(s): {SPANS_PER_COMMIT} span(s)" in forgot.output
    assert "until `tracegrade maintain --purge-deleted` rewrites those files" in forgot.output
    everyone = {f"user-{t}" for t in range(1, 7)}
    assert _names_in_files(data) == everyone  # deleted, yet still in its file

    _maintain(location, data, "--keep", "0s")
    assert _names_in_files(data) == everyone  # plain maintenance rewrites only files mostly deleted
    output = _maintain(location, data, "--purge-deleted", "--keep", "0s")
    assert _names_in_files(data) == everyone - {"user-1"}, output
    with LakeStore(location, read_only=True) as reader:
        counts = reader.query("SELECT name, count(*) FROM spans GROUP BY name ORDER BY name").rows
    assert counts == [(f"user-{t}", SPANS_PER_COMMIT) for t in range(2, 7)]


def test_maintain_refuses_a_file_store(tmp_path: Path) -> None:
    store = tmp_path / "traces.duckdb"
    result = CliRunner().invoke(cli, ["maintain", "--store", str(store)])
    assert result.exit_code == 2
    assert "works on a lake store" in result.output and "needs no maintenance" in result.output
    assert not store.exists()


def test_maintain_needs_the_data_path_and_a_duration(lake: tuple[str, Path]) -> None:
    location, data = lake
    missing = CliRunner().invoke(cli, ["maintain", "--store", location])
    assert missing.exit_code == 2 and "--lake-data" in missing.output
    bad = CliRunner().invoke(cli, ["maintain", "--store", location, "--lake-data", str(data), "--every", "soon"])
    assert bad.exit_code == 2 and "--every" in bad.output
