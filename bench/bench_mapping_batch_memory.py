"""Peak RSS of a real ``tracegrade serve`` that starts on a backlog of large traces to map into trajectories.

``--traces`` traces of ``--spans`` spans (each with a ``--payload``-byte attribute) go to a first receiver over
OTLP/HTTP, one trace per request; its file's trajectory rows are then dropped (``tests.support.mapping_backlog``),
so a second receiver finds every trace stale at its start and claims them 250 at a time. The script waits until
every trace has its trajectory again (checked trace by trace through ``/v1/query``) and prints the second
receiver's VmHWM in MiB, the seconds it took, and the mapping batches its /metrics counted. ``--serve-arg``
passes an option to the second receiver (repeatable). ``--backlog FILE`` keeps the backlog's store there and starts
from a copy of it when it exists (the same traces for each run). Run from the checkout root:

    python bench/bench_mapping_batch_memory.py --traces 250 --spans 200 --payload 2000 --backlog /tmp/backlog.duckdb
    python bench/bench_mapping_batch_memory.py --backlog /tmp/backlog.duckdb --serve-arg=--mapping-batch-bytes=8MiB
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support when run as a script

from tests.support.decode_flood import status_bytes
from tests.support.export_load import make_batches
from tests.support.mapping_backlog import file_backlog
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, receiver_metric

MIB = 1024 * 1024
STORE_METRICS = ("traces_rebuilt", "rebuild_batches", "mapping_batches", "mapping_batch_bytes_max")


def _store_metrics(http_url: str) -> dict[str, float | None]:
    found: dict[str, float | None] = {}
    for name in STORE_METRICS:
        try:
            found[name] = receiver_metric(http_url, name, prefix="tracegrade_store_")
        except StopIteration:  # a tracegrade without this metric
            found[name] = None
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=300, help="traces sent")
    parser.add_argument("--spans", type=int, default=400, help="spans per trace")
    parser.add_argument("--payload", type=int, default=2000, help="bytes of each span's payload attribute")
    parser.add_argument("--serve-arg", action="append", default=[], help="an option for the second receiver")
    parser.add_argument("--backlog", type=Path, help="the backlog's store, kept and reused")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        store = Path(directory) / "bench.duckdb"
        if args.backlog is not None and args.backlog.exists():
            shutil.copyfile(args.backlog, store)
        else:
            file_backlog(store, make_batches(args.traces, args.spans, args.payload))
            if args.backlog is not None:
                shutil.copyfile(store, args.backlog)
        began = time.monotonic()
        with ServerProcess(store, extra_args=tuple(args.serve_arg)) as server:
            expected = query(server.http_url, "SELECT trace_id, count(*) FROM spans GROUP BY ALL ORDER BY trace_id")
            while query(server.http_url, "SELECT count(*) FROM traces")[0][0] < len(expected):
                time.sleep(0.2)
            built = time.monotonic() - began
            rows = query(server.http_url, "SELECT trace_id, span_count FROM traces ORDER BY trace_id")
            assert rows == expected, "a trace's trajectory is missing, doubled or short"
            peak = status_bytes(server.pid, "VmHWM")
            counted = _store_metrics(server.http_url)
    print(
        json.dumps(
            {
                "traces": len(expected),
                "spans": sum(count for _, count in expected),
                "serve_args": args.serve_arg,
                "vmhwm_mib": round(peak / MIB),
                "seconds_to_build": round(built, 1),
                **counted,
            }
        )
    )


if __name__ == "__main__":
    main()
