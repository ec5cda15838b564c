"""A disk that stays full: the receiver must outlive any number of failed reopens, leak nothing per attempt,
and store every acknowledged span once space is back.

DuckDB 1.5 invalidates a database whose checkpoint failed, and a read cursor whose transaction had read it
then aborted the whole process (a C++ ``terminate``) when it was closed. A receiver met it after some 250
reopen attempts on a full disk: each attempt's journal replay ends in a checkpoint that fails, while the
attempt's trajectory rebuilder may be reading. The first test makes that read deterministic (a UDF holds
the read open across the failed checkpoint); the second drives 100 reopen attempts of a real
receiver under real OTLP exporters.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

from tests.support.export_load import ExportLoad, assert_stored_once, make_batches
from tests.support.server_process import ServerProcess
from tests.support.small_fs import fill, free, small_filesystem

pytestmark = pytest.mark.slow

_CHECKOUT = Path(__file__).parent.parent

# A read holds its transaction open (the UDF waits) while the store's checkpoint fails on the full disk.
_READ_ACROSS_A_FAILED_CHECKPOINT = """
import sys, threading
from pathlib import Path
from tests.support.small_fs import fill
from tests.support.store_records import make_span
from tracegrade.store import TraceStore

path = Path(sys.argv[1])
store = TraceStore(path, wal=False)
store.write([make_span(t, s) for t in range(50) for s in range(10)])
reading, release = threading.Event(), threading.Event()

def hold(value: int) -> int:
    reading.set()
    release.wait()
    return value

store._con.create_function("hold", hold, side_effects=True)  # cursors of the store's connection see it
answers = []

def read() -> None:
    try:
        answers.append(store.query("SELECT hold(count(*)::INTEGER) AS n FROM spans").rows)
    except Exception as exc:
        answers.append(type(exc).__name__)

reader = threading.Thread(target=read)
reader.start()
reading.wait()  # the read's transaction has read the spans table
fill(path.parent)
try:
    store.checkpoint()
except Exception as exc:
    print("checkpoint failed:", str(exc).splitlines()[0], flush=True)
print("invalidated:", store.failure is not None, flush=True)
if sys.argv[2] == "close-while-reading":  # what a receiver does with a failed store: close it, reads or not
    closer = threading.Thread(target=store.close)
    closer.start()
    while not store.closed:
        pass
    release.set()
    closer.join()
    reader.join()
else:
    release.set()
    reader.join()
    store.close()
print("read:", answers, flush=True)
print("closed", flush=True)
"""


@pytest.mark.parametrize("ending", ["read-then-close", "close-while-reading"])
def test_a_read_open_while_a_checkpoint_invalidates_the_store_ends_without_aborting_the_process(
    tmp_path: Path, ending: str
) -> None:
    with small_filesystem(tmp_path / "fs", "32m") as mount:
        child = subprocess.run(
            [sys.executable, "-c", _READ_ACROSS_A_FAILED_CHECKPOINT, str(mount / "store.duckdb"), ending],
            capture_output=True,
            text=True,
            cwd=_CHECKOUT,
            timeout=120,
        )
    output = child.stdout + child.stderr
    assert "terminate called" not in output, output
    assert child.returncode == 0, output
    assert "No space left on device" in output and "invalidated: True" in output, output
    # a read that ended by itself had its rows; one still running when the store closed was interrupted (the
    # close waited for it to end before it closed the file)
    expected = "read: [[(500,)]]" if ending == "read-then-close" else "read: ['QueryCancelled']"
    assert expected in output, output
    assert output.rstrip().endswith("closed"), output


# the reopen loop's pause shortened, and every failed attempt logged, so hundreds of them take seconds
_FAST_REOPENS = (
    "import tracegrade.ingest.server as s; s.REOPEN_RETRY_SECONDS = 0.02; s.REOPEN_LOG_SECONDS = 0.0; "
    "from tracegrade.cli.main import main; main()"
)


def _attempts(log: Path) -> int:
    counts = re.findall(r"(\d+) attempt\(s\) so far", log.read_text(errors="replace"))
    return int(counts[-1]) if counts else 0


def _resources(pid: int) -> tuple[int, int]:
    """Open file descriptors and threads of process ``pid``."""
    status = Path(f"/proc/{pid}/status").read_text()
    threads = int(re.search(r"^Threads:\s+(\d+)", status, re.M).group(1))  # type: ignore[union-attr]
    return len(os.listdir(f"/proc/{pid}/fd")), threads


def _wait(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_many_failed_reopens_on_a_full_disk_leave_the_receiver_alive_and_lose_nothing(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"  # off the full disk, so the receiver's log stays readable
    with small_filesystem(tmp_path / "fs", "20m") as mount:
        store = mount / "store.duckdb"
        server = ServerProcess(store, launch=_FAST_REOPENS)
        server.log_path = log
        server.start()
        load = ExportLoad(
            HttpSpanExporter(endpoint=f"{server.http_url}/v1/traces", timeout=30),
            make_batches(400, 20, payload_bytes=1500),
            pause=0.05,
            resend=True,  # a Collector's queue: a batch given up on during the outage is sent again
        )
        try:
            load.start()
            _wait(lambda: load.acked_batches >= 20, 60, "the first acknowledged exports")
            fill(mount)
            _wait(lambda: _attempts(log) >= 30, 300, "30 reopen attempts on the full disk")
            early = _resources(server.pid)
            _wait(lambda: _attempts(log) >= 100 or server.process.poll() is not None, 600, "100 reopen attempts")  # type: ignore[union-attr]
            assert server.process.poll() is None, f"the receiver died during the outage:\n{log.read_text()[-3000:]}"  # type: ignore[union-attr]
            late = _resources(server.pid)
            # an attempt in flight holds a few descriptors and threads; a leak per attempt would be over a hundred
            assert late[0] <= early[0] + 8, f"file descriptors grew from {early[0]} to {late[0]} over 70 attempts"
            assert late[1] <= early[1] + 8, f"threads grew from {early[1]} to {late[1]} over 70 attempts"
            acked_while_full = load.acked_batches
            free(mount)
            _wait(lambda: load.acked_batches > acked_while_full + 20, 180, "exports accepted after the disk was freed")
            load.join(300)
            assert not load.is_alive(), "the exporter never finished"
        finally:
            load.stop()
            server.kill()  # SIGKILL: what was acknowledged must come back from the journal
        restarted = ServerProcess(store)
        restarted.log_path = log
        with restarted:
            pass
        stored = assert_stored_once(store, load.acked)
    assert len(load.acked) == 400 * 20 and len(stored) == len(load.acked)
    text = log.read_text()
    assert "terminate called" not in text
    assert "reopening the store failed" in text and "the store is open again" in text
