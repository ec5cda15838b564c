"""A full disk under a running receiver: exports are refused retryably while it lasts, the receiver recovers
by itself once space is back (no restart), and after a SIGKILL every acknowledged span is stored once.

The store, its journal and its temp directory live on a real tmpfs of a few MB that the test fills up
and frees again while a real OTLP/HTTP exporter sends traces.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

from tests.support.export_load import ExportLoad, assert_stored_once, make_batches
from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import span_json, traces_json, unique_trace_id
from tests.support.small_fs import fill, free, small_filesystem
from tracegrade.errors import StoreError
from tracegrade.store import TraceStore

pytestmark = pytest.mark.slow


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _big_request() -> bytes:
    """A request larger than any scrap of room a filled tmpfs keeps in pages already allocated."""
    trace_id = unique_trace_id()
    spans = [span_json(trace_id, i, attributes=[{"key": "x", "value": {"stringValue": "y" * 4000}}]) for i in range(64)]
    return json.dumps(traces_json(spans)).encode()


def test_a_full_disk_is_refused_retryably_recovered_from_by_itself_and_loses_nothing(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", "64m") as mount:
        store = mount / "store.duckdb"
        server = ServerProcess(store)
        server.log_path = tmp_path / "serve.log"  # off the full disk, so the receiver's log stays readable
        server.start()
        load = ExportLoad(
            HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces", timeout=120),
            make_batches(160, 20, payload_bytes=1500),
            pause=0.05,
        )
        try:
            load.start()
            _wait(lambda: load.acked_batches >= 20, 60, "the first acknowledged exports")
            fill(mount)
            refused = post(f"{server.http_url}/v1/traces", _big_request(), "application/json")
            assert refused.status == 503, refused.body
            assert "Retry-After" in refused.headers
            acked_while_full = load.acked_batches
            # the disk stays full while the receiver tries to reopen the failed store (its first checkpoint fails)
            log_path = tmp_path / "serve.log"
            _wait(lambda: "reopening the store failed" in log_path.read_text(), 60, "a reopen tried on the full disk")
            free(mount)
            # no restart: exports are accepted again once the disk has room
            _wait(lambda: load.acked_batches > acked_while_full + 10, 90, "exports accepted after the disk was freed")
            accepted = post(f"{server.http_url}/v1/traces", _big_request(), "application/json")
            assert accepted.status == 200, accepted.body
            load.join(180)
            assert not load.is_alive(), "the exporter never finished"
            metrics = urllib.request.urlopen(f"{server.http_url}/metrics").read().decode()
            answers = [line for line in metrics.splitlines() if line.startswith("tracegrade_requests_total")]
            assert load.failed_batches == 0, f"{load.failed_batches} exports given up; answers: {answers}"
        finally:
            load.stop()
            server.kill()  # SIGKILL: what was acknowledged must come back from the journal
        restarted = ServerProcess(store)
        restarted.log_path = tmp_path / "serve.log"
        with restarted:
            pass
        stored = assert_stored_once(store, load.acked)
        assert len(load.acked) == 160 * 20 and len(stored) >= len(load.acked)
        log = (tmp_path / "serve.log").read_text()
        assert "No space left on device" in log
        # each line of the receiver's log says when it happened
        stamp = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4} "
        assert re.search(stamp + r"ERROR tracegrade\.ingest\.server: reopening the store failed", log, re.M), log


_WAL_WRITER = """
import sys, time
from tests.support.store_records import make_span
from tracegrade.store import TraceStore
store = TraceStore(sys.argv[1], wal=True)
store.write([make_span(t, s) for t in range(50) for s in range(10)])
print("written", flush=True)
time.sleep(120)
"""


def test_a_store_whose_first_checkpoint_hits_a_full_disk_fails_to_open_as_a_store_error(tmp_path: Path) -> None:
    # what a receiver reopening its failed store meets while the disk is still full: it must be a StoreError
    # (retried), not DuckDB's own exception, which ended the receiver's reopening for good
    with small_filesystem(tmp_path / "fs", "32m") as mount:
        path = mount / "store.duckdb"
        TraceStore(path).close()
        writer = subprocess.Popen(
            [sys.executable, "-c", _WAL_WRITER, str(path)], stdout=subprocess.PIPE, cwd=Path(__file__).parent.parent
        )
        assert writer.stdout is not None and writer.stdout.readline() == b"written\n"
        writer.kill()  # a WAL left to replay: opening the store must write a checkpoint
        writer.wait()
        fill(mount)
        with pytest.raises(StoreError, match="No space left on device") as refused:
            TraceStore(path, wal=False)
        assert str(path) in str(refused.value)
        free(mount)
        with TraceStore(path, wal=False) as store:
            assert store.query("SELECT count(*) FROM spans").rows == [(500,)]
