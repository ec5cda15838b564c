"""Checkpoints on row-group boundaries: the RowGroupFill estimate, DuckDB's placement of appended rows
(which the estimate models), and the store writer filling one row group per checkpoint."""

from __future__ import annotations

import pytest

from tracegrade.store import StoreWriter, TraceStore
from tracegrade.store import writer as writer_module
from tracegrade.store.prepared import prepare_write
from tracegrade.store.row_groups import RowGroupFill
from tracegrade.store.trace_store import ROW_GROUP_SIZE

from .support.store_records import make_span


def _spans(first: int, count: int) -> list:
    """``count`` spans with ids from ``first`` on, ten to a trace."""
    return [make_span(n // 10, n, parent=None if n % 10 == 0 else n - 1) for n in range(first, first + count)]


def _row_groups(store: TraceStore) -> list[int]:
    """Rows per row group of the spans table, in order (storage details are outside the query sandbox)."""
    rows = store._run(
        "SELECT max(count) FROM pragma_storage_info('spans') WHERE column_id = 0 "
        "GROUP BY row_group_id ORDER BY row_group_id",
        None,
        check=False,
    ).rows
    return [int(count) for (count,) in rows]


def test_fill_counts_rows_until_the_group_is_full():
    group = RowGroupFill(100)
    assert group.room == 100  # nothing unsaved: the next rows start a group
    group.appended(60)
    assert (group.rows, group.room, group.full, group.unsaved) == (60, 40, False, True)
    assert group.fits(40) and not group.fits(41)
    group.appended(40)
    assert group.full and group.room == 0


def test_rows_spill_from_an_unsaved_group_and_start_anew_after_a_checkpoint():
    group = RowGroupFill(100, rows=90, unsaved=True)
    group.appended(30)  # 10 fill the group, 20 start the next
    assert group.rows == 20
    group.checkpointed()
    assert not group.unsaved and group.room == 100
    group.appended(30)  # the checkpointed group is not appended to
    assert group.rows == 30
    group.appended(250)  # a transaction of whole groups or more: groups of 100, then 50
    assert group.rows == 50


def test_duckdb_places_rows_as_the_estimate_says(tmp_path):
    """The placement RowGroupFill models, checked against the store's layout at every checkpoint (a DuckDB
    release that places rows differently fails here: its checkpoints would rewrite row groups)."""
    size = ROW_GROUP_SIZE
    between_checkpoints = [
        [size // 2, size // 2],  # one full group
        [size - 100, 300],  # a new group after the checkpoint; the second write spills 200 rows
        [size],  # a whole group
        [size // 2, size + 500],  # a transaction of more than a group starts new groups
    ]
    first = 1
    with TraceStore(tmp_path / "layout.duckdb", wal=False) as store:
        for writes in between_checkpoints:
            for count in writes:
                store.write_batch([prepare_write(_spans(first, count))])
                first += count
            store.checkpoint()
            assert store.span_group.rows == _row_groups(store)[-1], (writes, _row_groups(store))
        assert sum(_row_groups(store)) == first - 1


@pytest.mark.parametrize("submission", [500, ROW_GROUP_SIZE // 16])
def test_the_writer_fills_one_row_group_per_transaction_run(tmp_path, monkeypatch, submission):
    """No transaction crosses a row-group boundary: each group holds as many whole submissions as fit
    (with 500-span submissions, 16 of them: 8,000 of 8,192 rows), however the writer batched them."""
    monkeypatch.setattr(writer_module, "CHECKPOINT_SECONDS", 3600.0)  # no part-full checkpoint on a slow machine
    store = TraceStore(tmp_path / "groups.duckdb", wal=False)
    writer = StoreWriter(store, max_queue_spans=10**6, checkpoint_bytes=2**40, settle_seconds=3600)
    writer.start()
    submissions = 40
    futures = [writer.submit(_spans(1 + i * submission, submission)) for i in range(submissions)]
    for future in futures:
        assert future.result(timeout=60).spans_inserted == submission
    per_group = ROW_GROUP_SIZE // submission
    expected = [per_group * submission] * (submissions // per_group)
    if submissions % per_group:
        expected.append(submissions % per_group * submission)
    writer.close(rebuild_seconds=0)  # trajectories are not what this test is about
    with TraceStore(tmp_path / "groups.duckdb", read_only=True) as reopened:
        assert _row_groups(reopened) == expected
