"""``tracegrade maintain --purge-deleted`` on a DuckDB store file: the rows deleted from it (a forgotten trace's)
leave the file's storage, every live row stays as it was, and a file another process holds is refused unchanged.

DuckDB keeps a deleted row's bytes in the file; its storage lists the row until the file is rewritten, which
is what these tests read (``pragma_storage_info``), beside every table's contents."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from tests.support.store_records import holding_store, make_span, trace_hex
from tracegrade.cli.main import cli
from tracegrade.store import TraceStore

TRACES, SPANS = 300, 5

_TABLES = ("spans", "traces", "node_visits", "forgotten_traces", "schema_version")


def _trace(t: int) -> list:
    root = make_span(t, t * 100, name="agent", attributes={"gen_ai.operation.name": "invoke_agent"})
    return [root] + [make_span(t, t * 100 + n, parent=t * 100, name=f"step-{n}") for n in range(1, SPANS)]


@pytest.fixture
def store_file(tmp_path: Path) -> Path:
    """A store of TRACES traces, one of them forgotten."""
    path = tmp_path / "traces.duckdb"
    with TraceStore(path) as store:
        store.write([span for t in range(1, TRACES + 1) for span in _trace(t)])
        store.rebuild_trajectories([trace_hex(t) for t in range(1, TRACES + 1)])
        store.forget([trace_hex(1)])
    return path


def _stored_rows(path: Path, table: str) -> int:
    """How many rows the file's storage holds for ``table``, deleted ones included."""
    with duckdb.connect(str(path), read_only=True) as con:
        sql = (
            f"SELECT sum(count) FROM pragma_storage_info('{table}') WHERE column_id = 0 AND segment_type <> 'VALIDITY'"
        )
        return int(con.execute(sql).fetchone()[0])  # type: ignore[index]


def _contents(path: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(path), read_only=True) as con:
        return {table: con.execute(f"SELECT * FROM {table} ORDER BY ALL").fetchall() for table in _TABLES}


def _maintain(*args: str) -> Result:
    return CliRunner().invoke(cli, ["maintain", *args])


def test_a_purge_leaves_no_deleted_row_in_the_file_and_every_live_row_as_it_was(store_file: Path) -> None:
    live = (TRACES - 1) * SPANS
    assert _stored_rows(store_file, "spans") == TRACES * SPANS  # the forgotten trace's spans, still in the file
    before = _contents(store_file)
    store_file.chmod(0o600)

    result = _maintain("--store", str(store_file), "--purge-deleted")

    assert result.exit_code == 0 and "purged the deleted rows" in result.output, result.output
    assert _stored_rows(store_file, "spans") == live
    assert _stored_rows(store_file, "node_visits") == len(before["node_visits"])
    assert _contents(store_file) == before
    assert not store_file.with_name(store_file.name + ".purging").exists()
    assert store_file.stat().st_mode & 0o777 == 0o600
    with TraceStore(store_file) as store:  # keys, and the forgotten traces, hold in the new file
        store.write(_trace(1) + _trace(2))
        assert store.query("SELECT count(*) FROM spans").rows == [(live,)]


def test_a_purge_of_a_file_another_process_holds_is_refused_and_changes_nothing(store_file: Path) -> None:
    before = store_file.read_bytes()
    with holding_store(store_file):
        result = _maintain("--store", str(store_file), "--purge-deleted")
        retained = _maintain("--store", str(store_file), "--retain", "30d")
    assert result.exit_code == 2, result.output  # a held store is exit 2, as for forget and every store command
    assert "A purge rewrites the whole file: nothing may hold it meanwhile" in result.output
    assert retained.exit_code == 2, retained.output
    assert "give it --retain instead: a store file has one writer" in retained.output
    assert store_file.read_bytes() == before


def test_a_file_purge_runs_once_and_needs_the_file(tmp_path: Path, store_file: Path) -> None:
    again = _maintain("--store", str(store_file), "--purge-deleted", "--every", "1h")
    assert again.exit_code == 2 and "run it once, without --every" in again.output
    missing = _maintain("--store", str(tmp_path / "nope.duckdb"), "--purge-deleted")
    assert missing.exit_code != 0 and "nope.duckdb" in missing.output
    assert not (tmp_path / "nope.duckdb").exists()
