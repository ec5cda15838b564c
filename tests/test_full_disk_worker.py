"""`tracegrade serve --worker-rules` on a disk that fills up: the receiver reopens its store once, not again
and again while its in-process worker's writes fail it, and once space is back the receiver and the worker go on
by themselves and every acknowledged span is stored.

Before, each reopened store took the journal's small replay and then failed at the worker's next claim or batch
of results: the receiver reopened it every second or two for as long as the disk stayed full (13 reopenings in
30 s of a full 64 MB tmpfs), refusing exports at each, and spent an attempt of each job whose results were lost.

Real processes and filesystems: ``tracegrade serve`` on a tmpfs that the test fills and frees, traces sent by
the OpenTelemetry SDK's OTLP/HTTP exporter, the store read span by span afterwards.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.support.export_load import assert_stored_once, export_all, make_batches
from tests.support.server_otlp import get_text, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import span_json, traces_json, unique_trace_id
from tests.support.small_fs import fill, free, small_filesystem
from tests.support.waiting import wait_until
from tests.support.worker_process import metric_samples
from tracegrade.ingest.disk_room import DiskRoom
from tracegrade.store import TraceStore

W = "tracegrade_worker_"
TRACES = 300  # stored before the disk fills
MORE_TRACES = 50  # exported once space is back
WORKER_CYCLES = 40  # the worker's cycles watched on the full disk (5 a second at poll_seconds 0.2)
MOST_REOPENINGS = 2  # the failure the worker's first write caused, and one to spare
REOPENED = "the store is open again"


def _rules(path: Path) -> Path:
    rule = {"name": "keywords", "settle_seconds": 0, "criteria": {"contains_keywords": {"keywords": ["step"]}}}
    # a short lease: the jobs whose results the full disk lost are taken again soon after space is back
    path.write_text(yaml.safe_dump({"poll_seconds": 0.2, "lease_seconds": 3, "rules": [rule]}), encoding="utf-8")
    return path


def _samples(server: ServerProcess) -> dict:
    status, text = get_text(f"{server.http_url}/metrics")
    assert status == 200, text
    return metric_samples(text)


def _worker_cycles(server: ServerProcess) -> float:
    """Every cycle the worker began: completed, failed or held (a series the old code lacks counts 0)."""
    samples = _samples(server)
    names = (W + "cycle_duration_seconds_count", W + "cycle_failures_total", W + "cycles_held_total")
    return sum(samples.get((name, frozenset()), 0.0) for name in names)


def _graded(server: ServerProcess) -> float:
    samples = _samples(server)
    return sum(v for (name, _), v in samples.items() if name == W + "jobs_graded_total")


def _state(server: ServerProcess) -> str:
    """What a wait that ran out should show: the receiver's log and its worker's metrics."""
    try:
        samples = {name: value for (name, _), value in _samples(server).items() if name.startswith(W)}
    except (AssertionError, OSError) as exc:
        samples = {"unavailable": repr(exc)}
    return f"--- worker metrics ---\n{samples}\n--- serve.log (its end) ---\n{server.log()[-6000:]}"


def _large_request() -> bytes:
    """About 1 MB of spans: more than the scraps of room a filled tmpfs has."""
    trace_id = unique_trace_id()
    attributes = [{"key": "x", "value": {"stringValue": "y" * 4000}}]
    return json.dumps(traces_json([span_json(trace_id, i, attributes=attributes) for i in range(256)])).encode()


@pytest.mark.slow
def test_a_full_disk_reopens_the_store_once_while_the_worker_waits_and_both_go_on_once_space_is_back(
    tmp_path: Path,
) -> None:
    rules = _rules(tmp_path / "rules.yaml")
    with small_filesystem(tmp_path / "fs", "64m") as mount:
        store = mount / "store.duckdb"
        # traces stored by a receiver without a worker, then stopped: everything it acknowledged is in the file
        first = ServerProcess(store)
        first.log_path = tmp_path / "first.log"
        with first:
            before = export_all(first.http_url, make_batches(TRACES, 10, payload_bytes=1500))
            assert first.terminate() == 0, first.log()
        # the disk fills; room is left for the receiver's small files, not for the grading it is to do
        fill(mount, leave=64 * 1024)
        server = ServerProcess(store, extra_args=("--worker-rules", str(rules)))
        server.log_path = tmp_path / "serve.log"  # off the full disk, so the receiver's log stays readable
        reopenings = lambda: server.log().count(REOPENED)  # noqa: E731
        with server:
            # its worker's first writes (the jobs of the stored traces) fail the store, which is reopened
            wait_until(
                lambda: reopenings() >= 1,
                "the store reopened after the worker's write failed it",
                120,
                explain=lambda: _state(server),
            )
            # count events, not time: the worker's cycles from here on, against the reopenings they cause
            watched_from = _worker_cycles(server)
            wait_until(
                lambda: _worker_cycles(server) >= watched_from + WORKER_CYCLES or reopenings() > MOST_REOPENINGS,
                f"{WORKER_CYCLES} worker cycles on the full disk",
                180,
                explain=lambda: _state(server),
            )
            assert reopenings() <= MOST_REOPENINGS, server.log()
            assert "No space left on device" in server.log()
            samples = _samples(server)
            assert samples[W + "cycles_held_total", frozenset()] >= WORKER_CYCLES
            assert samples[W + "store_reachable", frozenset()] == 0
            status, text = get_text(f"{server.http_url}/healthz/worker")
            assert status == 503 and "grading waits for" in text, text
            assert get_text(f"{server.http_url}/readyz")[0] == 200  # the receiver itself is fine
            # an export the full disk cannot journal is refused, retryably: never acknowledged
            refused = post(f"{server.http_url}/v1/traces", _large_request(), "application/json")
            assert refused.status == 503 and "Retry-After" in refused.headers, refused.body
            free(mount)
            # the receiver and its worker go on by themselves: new exports are stored and every trace is graded
            after = export_all(server.http_url, make_batches(MORE_TRACES, 10, payload_bytes=1500))
            wait_until(
                lambda: _graded(server) >= TRACES + MORE_TRACES,
                "every trace graded",
                180,
                explain=lambda: _state(server),
            )
            status, text = get_text(f"{server.http_url}/healthz/worker")
            assert status == 200, text
            assert "grading writes again" in server.log()
            assert reopenings() <= MOST_REOPENINGS, server.log()
            assert server.terminate() == 0, server.log()
        assert_stored_once(store, before + after)
        with TraceStore(store, read_only=True) as reader:
            jobs = reader.query("SELECT status, count(*), max(attempts) FROM grading_jobs GROUP BY status").rows
            traces = reader.query("SELECT count(*) FROM traces").rows[0][0]
        assert traces == TRACES + MORE_TRACES
        # the job state is whole: a job per trace, each graded to the end, none failed for the disk's sake
        assert [(status, n) for status, n, _ in jobs] == [("done", traces)], jobs


def test_disk_room_holds_writes_after_a_full_disk_failure_until_the_filesystem_has_room(tmp_path: Path) -> None:
    with small_filesystem(tmp_path / "fs", "8m") as mount:
        room = DiskRoom(mount)
        fill(mount)
        assert room.shortage() is None  # no failure seen: a full disk alone holds nothing
        room.store_failed("IO Error: Could not read file: Input/output error")
        assert room.shortage() is None  # a failure of another kind: reopening the store is all it takes
        room.store_failed('IO Error: Could not write file "store.duckdb": No space left on device')
        held = room.shortage()
        assert held is not None and str(mount) in held and "No space left on device" in held, held
        free(mount)
        assert room.shortage() is None  # a tenth of a small filesystem is room enough
        fill(mount)
        assert room.shortage() is None  # the hold ended with the room: a new full-disk failure starts another
