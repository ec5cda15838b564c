"""The writer's uniqueness check on (trace_id, span_id): start-time ranges and lookups in a real store."""

from __future__ import annotations

from tracegrade.models.span import SpanRecord
from tracegrade.store import TraceStore
from tracegrade.store.prepared import prepare_write
from tracegrade.store.span_keys import START_GAP_NS, start_ranges

from .support.store_records import make_span, trace_hex

SECOND = 10**9


def test_start_ranges_split_at_gaps_wider_than_the_limit():
    starts = [100, 105, 100 + START_GAP_NS + 1_000, 101, 100 + START_GAP_NS + 2_000]
    assert start_ranges(starts) == [(100, 105), (100 + START_GAP_NS + 1_000, 100 + START_GAP_NS + 2_000)]
    assert start_ranges([]) == []
    assert start_ranges([7, 7, 7]) == [(7, 7)]


def test_start_ranges_merge_the_closest_ranges_beyond_the_limit():
    starts = [i * 100 * SECOND for i in range(10)] + [950 * SECOND]  # gaps of 100 s, one of 50 s
    ranges = start_ranges(starts, gap_ns=SECOND, limit=4)
    assert len(ranges) == 4
    assert ranges[0][0] == 0 and ranges[-1][1] == 950 * SECOND
    covered = [s for s in starts if any(low <= s <= high for low, high in ranges)]
    assert covered == starts  # every start stays searched


def _span(trace: int, span: int, start_s: int) -> SpanRecord:
    record = make_span(trace, span)
    record.start_ns, record.end_ns = start_s * SECOND, start_s * SECOND + 1
    return record


def test_a_span_resent_much_later_is_found_among_many_others(tmp_path):
    with TraceStore(tmp_path / "keys.duckdb") as store:
        assert store.write([_span(1, 1, 10), _span(1, 2, 11)]).spans_inserted == 2
        for trace in range(2, 40):  # later traffic in other row-group ranges
            store.write([_span(trace, n, 1000 + trace) for n in range(1, 600)])
        again = store.write([_span(1, 2, 11), _span(1, 3, 12), _span(39, 5, 1039)])
        assert (again.spans_inserted, again.spans_duplicate) == (1, 2)
        rows = store.query("SELECT count(*), count(DISTINCT (trace_id, span_id)) FROM spans").rows
        assert rows[0][0] == rows[0][1] == 2 + 38 * 599 + 1


def test_the_same_span_twice_in_one_batch_is_stored_once_and_credited_to_the_first_copy(tmp_path):
    with TraceStore(tmp_path / "keys.duckdb") as store:
        result = store.write([_span(3, 1, 5), _span(3, 1, 5), _span(3, 2, 6)])
        assert (result.spans_inserted, result.spans_duplicate) == (2, 1)
        assert store.query("SELECT span_id FROM spans WHERE trace_id = ? ORDER BY 1", [trace_hex(3)]).rows == [
            ("0000000000000001",),
            ("0000000000000002",),
        ]


def test_a_resent_batch_spread_over_sixteen_ranges_is_checked_within_a_small_memory_limit(tmp_path):
    # Sixteen start-time ranges; the lookup joins them with the batch once, so it fits in 24 MB
    # (a hash join per range took about 7.5 MB each: 120 MB).
    spread = [_span(trace, n, trace * 100 + n) for trace in range(1, 17) for n in range(1, 33)]
    assert len(start_ranges([span.start_ns for span in spread])) == 16
    with TraceStore(tmp_path / "keys.duckdb", memory_limit="24MB") as store:
        assert store.write(spread).spans_inserted == len(spread)
        again = store.write(spread)
        assert (again.spans_inserted, again.spans_duplicate) == (0, len(spread))
        assert store.query("SELECT count(*) FROM spans").rows == [(len(spread),)]


def test_the_file_store_looks_up_spans_fresh_from_an_exporter_too(tmp_path):
    # the look-up is the file's only guard against a second copy: a re-sent request's spans are found
    sent = [_span(4, 1, 5), _span(4, 2, 6)]
    with TraceStore(tmp_path / "keys.duckdb") as store:
        store.write_batch([prepare_write(sent, fresh=True)])
        again = store.write_batch([prepare_write(sent, fresh=True)]).results[0]
        assert (again.spans_inserted, again.spans_duplicate) == (0, 2)
        assert store.query("SELECT count(*) FROM spans").rows == [(2,)]
