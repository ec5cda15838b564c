"""Review of the day's commits (session 19): what they broke, each pinned by a test that failed before its fix.

- a receiver stopped (SIGTERM) while it purges its store file (``POST /v1/purge``) abandons the copy and stops,
  rather than finishing a copy that may take hours, and its old file opens whole with every acknowledged span.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

from tests.support.export_load import assert_stored_once
from tests.support.server_requests import query
from tests.support.store_records import trace_hex
from tests.support.waiting import wait_until
from tests.test_purge_through_server import (
    BIG_TRACES,
    SECRET_TRACE,
    TOKEN,
    _exporting,
    _server,
    _store_with_secret,
)


def test_a_receiver_stopped_in_the_middle_of_a_purge_abandons_it_and_keeps_every_acknowledged_span(
    tmp_path: Path,
) -> None:
    store = tmp_path / "traces.duckdb"
    copy = store.with_name(store.name + ".purging")
    secret = f"erase-me-{uuid.uuid4().hex}@example.com"
    _store_with_secret(store, secret, BIG_TRACES, blob=400)
    server = _server(store, tmp_path).start()
    load = _exporting(server, 3000)
    try:
        wait_until(lambda: load.acked_batches >= 10, "exports acknowledged before the purge")
        command = [sys.executable, "-c", "from tracegrade.cli.main import main; main()", "forget"]
        forgot = subprocess.run([*command, "--store", str(store), "--token", TOKEN, trace_hex(SECRET_TRACE)])
        assert forgot.returncode == 0
        command[-1] = "maintain"
        maintain = subprocess.Popen(
            [*command, "--store", str(store), "--purge-deleted", "--token", TOKEN],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        wait_until(copy.exists, "the purge's copy of the file", timeout=120, interval=0.005)
        returncode = server.terminate()
        output, _ = maintain.communicate(timeout=60)
    finally:
        load.stop()
        load.join(120)
        server.kill()
    assert not load.is_alive()
    assert returncode == 0, server.log()
    assert "purge was interrupted" in server.log(), server.log()
    assert maintain.returncode == 1 and "purge was interrupted" in output, output
    assert not copy.exists()
    assert secret.encode() in store.read_bytes()  # the old file, whole: the copy was abandoned

    with _server(store, tmp_path) as restarted:
        count = query(restarted.http_url, "SELECT count(*) FROM spans WHERE trace_id = ?", [trace_hex(1)], TOKEN)
        assert count == [[0]]
        assert restarted.terminate() == 0, restarted.log()
    counts = assert_stored_once(store, load.acked)
    assert len(counts) == (BIG_TRACES - 1) * 5 + len(load.acked)
