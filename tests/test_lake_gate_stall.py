"""A lake deletion's process that stops while it holds the write gate exclusive holds writers back no longer
than the stall timeout, and one that keeps working keeps the gate however long it takes (a real PostgreSQL,
a real second process stopped with SIGSTOP)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.store_kinds import open_store
from tests.support.store_records import make_span, trace_hex
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

STALL_TIMEOUT = 1.0  # seconds, in the holding process (60 by default)

# A deletion's process, reduced to what matters here: it takes the gate exclusive, says so, then stops itself
# (``stop``) or keeps working for ``hold`` seconds.
_HOLDER = """
import os, signal, sys, time
import tracegrade.store.lake_write_gate as gate_module
gate_module.STALL_TIMEOUT = float(sys.argv[2])
gate = gate_module.WriteGate(sys.argv[1], lambda why: print("out of reach:", why, flush=True))
with gate.exclusive():
    print("held", flush=True)
    if sys.argv[3] == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        time.sleep(float(sys.argv[3]))
print("released", flush=True)
gate.close()
"""


@contextmanager
def _holder(store: LakeStore, then: str) -> Iterator[subprocess.Popen[str]]:
    conninfo = catalog_conninfo(str(store.location))
    args = [sys.executable, "-c", _HOLDER, conninfo, str(STALL_TIMEOUT), then]
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert process.stdout is not None and process.stdout.readline() == "held\n"
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def _writing(store: LakeStore, trace: int) -> threading.Thread:
    """A write of one span of ``trace``, on a thread of its own (it waits at the gate while a deletion holds it)."""
    writer = threading.Thread(target=lambda: store.write([make_span(trace, 1, name="agent")]), daemon=True)
    writer.start()
    return writer


def _stopped(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.fixture
def lake(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[LakeStore]:
    with open_store("lake", tmp_path, request) as store:
        assert isinstance(store, LakeStore)
        yield store


def test_a_stopped_holder_loses_the_gate_and_the_writes_go_on(lake: LakeStore) -> None:
    with _holder(lake, "stop") as holder:
        writer = _writing(lake, 1)
        writer.join(30 * STALL_TIMEOUT)
        assert not writer.is_alive(), "a write waited for a stopped deletion beyond its stall timeout"
        assert _stopped(holder.pid), "the holder ran on: the test proves nothing"
        assert lake.query("SELECT trace_id FROM spans").rows == [(trace_hex(1),)]
        os.kill(holder.pid, signal.SIGCONT)  # it resumes without the gate, and ends cleanly
        assert holder.stdout is not None and "released" in holder.stdout.read()
        assert holder.wait(30) == 0


def test_a_holder_that_keeps_working_keeps_the_gate_past_the_stall_timeout(lake: LakeStore) -> None:
    with _holder(lake, str(5 * STALL_TIMEOUT)) as holder:
        writer = _writing(lake, 2)
        time.sleep(3 * STALL_TIMEOUT)
        assert writer.is_alive(), "a write went through the gate while a working deletion held it"
        assert holder.wait(60) == 0
        writer.join(60)
    assert not writer.is_alive()
    assert lake.query("SELECT trace_id FROM spans").rows == [(trace_hex(2),)]
