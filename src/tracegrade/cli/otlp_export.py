"""Export a store's spans and log records as OTLP requests (protobuf or OTLP/JSON), streamed page by page.

``stored_records`` reads the store a page at a time, ``otlp_encode`` / ``otlp_json_encode`` turn each page into
requests of bounded size, ``otlp_output`` writes them; memory holds one page, whatever the store holds. Each
record keeps its resource and scope (records of a page that share them share one resource block).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from tracegrade.cli.otlp_encode import logs_requests, traces_requests
from tracegrade.cli.otlp_json_encode import logs_json_requests, traces_json_requests
from tracegrade.cli.otlp_output import request_writer
from tracegrade.cli.stored_records import Selection, log_pages, span_pages
from tracegrade.store.access import ReadableStore

__all__ = ["FORMATS", "Exported", "export_otlp"]

FORMATS = ("otlp", "otlp-json")
# a request holds at most this many records and, unless one record is larger, this many bytes: far below what
# the Collector's and tracegrade's receivers accept by default (4 MiB gRPC messages, 16 MiB bodies)
_MAX_ITEMS = 1_000
_MAX_BYTES = 2 * 1024 * 1024


@dataclass
class Exported:
    """What an export wrote."""

    spans: int = 0
    logs: int = 0
    requests: int = 0


def export_otlp(
    store: ReadableStore,
    selection: Selection,
    output: Path,
    fmt: str,
    *,
    inputs: Iterable[str | Path] = (),
    progress: Callable[[int], None] | None = None,
) -> Exported:
    """Write the selected spans, then the selected log records, to ``output`` (``-``: stdout) in ``fmt``
    (``otlp``: length-prefixed protobuf requests; ``otlp-json``: OTLP/JSON lines); what was written.
    ``progress`` is told the number of records of each request written."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown OTLP export format {fmt!r}: use one of {', '.join(FORMATS)}")
    as_json = fmt == "otlp-json"
    traces = traces_json_requests if as_json else traces_requests
    logs = logs_json_requests if as_json else logs_requests
    with request_writer(output, framed=not as_json, inputs=inputs) as writer:

        def written(requests: Iterable[tuple[bytes, int]]) -> int:
            """Write ``requests`` (body, record count); how many records they held."""
            total = 0
            for body, count in requests:
                writer.write(body)
                total += count
                if progress is not None:
                    progress(count)
            return total

        sizes = {"max_items": _MAX_ITEMS, "max_bytes": _MAX_BYTES}
        spans = sum(written(traces(page, **sizes)) for page in span_pages(store, selection))
        records = sum(written(logs(page, **sizes)) for page in log_pages(store, selection))
    return Exported(spans=spans, logs=records, requests=writer.requests)
