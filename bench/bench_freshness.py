"""Trajectory freshness under sustained load: how far trajectory rows trail the stored spans (run by hand).

For each rate: start ``tracegrade serve`` on a fresh store, send the load generator's agent traces over
OTLP/HTTP protobuf at that many spans/s for ``--seconds`` (requests of 256 spans, paced from one
connection), and once a second ask the server how many stored spans belong to traces whose trajectory
rows are not built or not current yet (the lag). Reported: the lag's median and maximum over the second
half of the load (in spans, and in seconds of load), how long after the last send every trajectory was
current, and the server's peak RSS (receiver plus its mapping process).

    python bench/bench_freshness.py                       # 3,000, 6,000 and 9,000 spans/s for 30 s each
    python bench/bench_freshness.py --rates 5000 --seconds 60
    python bench/bench_freshness.py --rates 6000 --server-arg=--mapping-process   # mapping in a child
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path

from bench_ingest import PeakRss, query_number
from loadgen import build_requests
from tests.support.server_process import ServerProcess

BATCH = 256
CATCH_UP_TIMEOUT = 300.0
# spans of traces whose trajectory rows are missing or older than their newest span
LAG_SQL = """
    SELECT coalesce(sum(n), 0) FROM (
        SELECT count(*) AS n FROM spans s LEFT JOIN traces t USING (trace_id)
        GROUP BY s.trace_id, t.updated_at HAVING t.updated_at IS NULL OR max(s.received_at) > t.updated_at
    )
"""


def one_rate(rate: int, seconds: float, server_args: tuple[str, ...] = ()) -> dict[str, float]:
    bodies = build_requests(int(rate * seconds), BATCH, seed=5)
    with tempfile.TemporaryDirectory(prefix="tracegrade-bench-") as directory:
        server = ServerProcess(Path(directory) / "fresh.duckdb", extra_args=server_args).start()
        rss = PeakRss(server.pid)
        rss.start()
        try:
            connection = http.client.HTTPConnection(urllib.parse.urlsplit(server.http_url).netloc, timeout=60)
            lags: list[tuple[float, int]] = []
            started = next_sample = time.monotonic()
            for index, body in enumerate(bodies):
                pause = started + index * BATCH / rate - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
                connection.request("POST", "/v1/traces", body, {"Content-Type": "application/x-protobuf"})
                response = connection.getresponse()
                response.read()
                if response.status != 200:
                    raise RuntimeError(f"the receiver answered {response.status} at {rate} spans/s")
                if time.monotonic() >= next_sample:
                    lags.append((time.monotonic() - started, query_number(server.http_url, LAG_SQL)))
                    next_sample += 1.0
            sent_at = time.monotonic()
            while query_number(server.http_url, LAG_SQL):
                if time.monotonic() - sent_at > CATCH_UP_TIMEOUT:
                    raise RuntimeError(f"trajectories still behind {CATCH_UP_TIMEOUT:.0f} s after the load")
                time.sleep(0.25)
            caught_up = time.monotonic() - sent_at
        finally:
            server.terminate(timeout=600)
            rss.stopped.set()
    second_half = [lag for at, lag in lags if at >= seconds / 2] or [0]
    return {
        "rate": rate,
        "lag_median": statistics.median(second_half),
        "lag_max": max(second_half),
        "caught_up_seconds": caught_up,
        "peak_rss_mb": rss.peak / 2**20,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", type=int, nargs="+", default=[3000, 6000, 9000])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument(
        "--server-arg", action="append", default=[], help="extra `tracegrade serve` argument (repeatable)"
    )
    options = parser.parse_args()
    for rate in options.rates:
        r = one_rate(rate, options.seconds, tuple(options.server_arg))
        print(
            f"{rate:>6,} spans/s for {options.seconds:.0f} s: lag median {r['lag_median']:>8,.0f} spans "
            f"({r['lag_median'] / rate:.1f} s of load), max {r['lag_max']:>8,.0f} ({r['lag_max'] / rate:.1f} s); "
            f"all current {r['caught_up_seconds']:.1f} s after the last send; peak RSS {r['peak_rss_mb']:.0f} MB",
            flush=True,
        )


if __name__ == "__main__":
    main()
