"""The OTLP export reads a store in pages of bounded size (``stored_records``): on a real DuckDB store, every
selected span and log record comes exactly once whatever the page size, a page holds at most the page size
but for records sharing one exact time, and the selections (trace ids, time range, tenant) pick what a plain
filter over all the rows picks."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tracegrade.cli.stored_records import Selection, log_pages, span_pages, tenants_of
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.prepared import prepare_write
from tracegrade.store.tenant_scope import TenantStore
from tracegrade.store.trace_store import TraceStore

_BASE = 1_760_000_000_000_000_000
TIE = 12  # spans 100..111 share one start time, more than a small page holds


def _spans(tenant_mark: str) -> list[SpanRecord]:
    spans = []
    for n in range(150):
        start = _BASE + (100 if 100 <= n < 100 + TIE else n) * 1_000_000
        spans.append(
            SpanRecord(
                trace_id=f"{n % 17:032x}",
                span_id=f"{n + 1:016x}",
                name=f"{tenant_mark} span {n}",
                start_ns=start,
                end_ns=start + 5,
                resource={"service.name": f"svc-{n % 3}"},
            )
        )
    return spans


def _logs() -> list[LogRecordData]:
    logs = [
        LogRecordData(time_ns=_BASE + (n // 4) * 1_000_000, trace_id=f"{n % 17:032x}", body=f"log {n}")
        for n in range(40)
    ]
    # no event time: each is timed by its observed time, so they do not all fall in one page
    logs += [LogRecordData(time_ns=0, observed_time_ns=_BASE + n * 7_000, body=f"observed {n}") for n in range(20)]
    return logs


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("export-pages") / "store.duckdb"
    with TraceStore(path) as store:
        store.write_batch([prepare_write(_spans("acme"), _logs(), "acme")])
        store.write_batch([prepare_write(_spans("globex")[:30], [], "globex")])
    return path


@pytest.fixture
def store(store_path: Path) -> Iterator[TraceStore]:
    with TraceStore(store_path, read_only=True) as opened:
        yield opened


def _all_spans(store: TraceStore) -> list[tuple[str, str, str, int]]:
    return store.query("SELECT tenant, trace_id, span_id, start_ns FROM spans").rows


@pytest.mark.parametrize("page_size", [1, 5, 7, 64, 1000])
def test_every_span_and_log_record_comes_once_in_pages_of_at_most_the_page_size(
    store: TraceStore, page_size: int
) -> None:
    pages = list(span_pages(store, Selection(), page_size))
    seen = [(span.trace_id, span.span_id, span.name) for page in pages for span in page]
    assert len(seen) == len(set(seen)) == len(_all_spans(store)) == 180
    for page in pages:  # only the spans of one start time may make a page larger
        assert len(page) <= page_size or len({span.start_ns for span in page}) == 1
    starts = [span.start_ns for page in pages for span in page]
    assert starts == sorted(starts)
    log_pages_ = list(log_pages(store, Selection(), page_size))
    bodies = [record.body for page in log_pages_ for record in page]
    assert sorted(bodies) == sorted([f"log {n}" for n in range(40)] + [f"observed {n}" for n in range(20)])
    for page in log_pages_:
        # a record is timed by its event time, else its observed time, to the microsecond (the logs' time column)
        assert len(page) <= page_size or len({(r.time_ns or r.observed_time_ns) // 1000 for r in page}) == 1


def test_the_spans_of_a_page_that_share_a_resource_share_one_dict(store: TraceStore) -> None:
    (page,) = list(span_pages(store, Selection(trace_ids=(f"{3:032x}",)), 1000))
    assert {id(span.resource) for span in page} == {id(span.resource) for span in page if span.resource}
    assert len({id(span.resource) for span in page}) == len({span.resource["service.name"] for span in page})


def test_trace_ids_and_a_time_range_select_what_a_filter_over_every_row_selects(store: TraceStore) -> None:
    wanted = (f"{2:032x}", f"{5:032x}")
    since, until = _BASE + 20 * 1_000_000, _BASE + 103 * 1_000_000
    selection = Selection(trace_ids=wanted, since_ns=since, until_ns=until)
    got = sorted((s.trace_id, s.span_id) for page in span_pages(store, selection, 3) for s in page)
    expected = sorted(
        (trace, span) for _, trace, span, start in _all_spans(store) if trace in wanted and since <= start < until
    )
    assert got == expected and expected
    logs = [r for page in log_pages(store, Selection(since_ns=_BASE + 5 * 1_000_000), 4) for r in page]
    assert sorted(r.body for r in logs) == sorted(f"log {n}" for n in range(20, 40))


def test_a_tenant_sees_its_own_records_only(store: TraceStore) -> None:
    assert tenants_of(store, Selection()) == ["acme", "globex"]
    globex = TenantStore(store, "globex")  # closed with the fixture's store
    names = [span.name for page in span_pages(globex, Selection(), 4) for span in page]
    assert len(names) == 30 and all(name.startswith("globex ") for name in names)
    assert [r for page in log_pages(globex, Selection(), 4) for r in page] == []
    assert tenants_of(globex, Selection()) == ["globex"]
