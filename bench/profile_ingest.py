"""Where does the receiver's time go? A sampling profile of every server thread under the ingest load.

Runs a ReceiverServer in this process (event loop, decode pool, writer thread), drives it with
bench/loadgen.py in a separate process, and samples all thread stacks (``sys._current_frames``) every
few milliseconds until every span is stored. Prints, per thread group, the functions most often on top
of the stack (self time) and on the stack at all (cumulative), as shares of that group's samples.

    python bench/profile_ingest.py --spans 50000 --protocol http
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from types import FrameType

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH.parent))

from tests.support.server_inprocess import running_server  # noqa: E402
from tests.support.server_requests import query  # noqa: E402

IDLE_FUNCTIONS = {"wait", "select", "poll", "_worker", "get", "run_forever", "_run_once", "acquire", "sleep"}


def _where(frame: FrameType) -> str:
    code = frame.f_code
    module = Path(code.co_filename).name
    return f"{module}:{code.co_name}"


class StackSampler(threading.Thread):
    """Counts, per thread-name group, which functions are running (self) and on the stack (cumulative)."""

    def __init__(self, interval: float = 0.005) -> None:
        super().__init__(daemon=True)
        self.interval = interval
        self.stopped = threading.Event()
        self.self_counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.cumulative: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
        self.busy_samples: collections.Counter[str] = collections.Counter()

    def run(self) -> None:
        me = threading.get_ident()
        while not self.stopped.wait(self.interval):
            names = {thread.ident: thread.name for thread in threading.enumerate()}
            for ident, frame in sys._current_frames().items():
                if ident == me or names.get(ident) == "MainThread":
                    continue
                if (
                    frame.f_code.co_name in IDLE_FUNCTIONS
                    or frame.f_back is None
                    or _where(frame) == "threading.py:run"
                ):
                    continue  # waiting for work, or blocked in C without Python frames (grpc's poller)
                group = names.get(ident, "?").rstrip("_0123456789")
                self.busy_samples[group] += 1
                self.self_counts[group][_where(frame)] += 1
                seen: set[str] = set()
                walker: FrameType | None = frame
                while walker is not None:
                    where = _where(walker)
                    if where not in seen:
                        self.cumulative[group][where] += 1
                        seen.add(where)
                    walker = walker.f_back

    def report(self, top: int) -> str:
        lines = []
        total = sum(self.busy_samples.values()) or 1
        for group, busy in self.busy_samples.most_common():
            lines.append(f"\n== thread group {group!r}: {busy / total:.0%} of busy samples")
            for title, counter in (("self", self.self_counts[group]), ("cumulative", self.cumulative[group])):
                lines.append(f"  -- {title}")
                for where, count in counter.most_common(top):
                    lines.append(f"  {count / busy:6.1%}  {where}")
        return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--protocol", choices=("grpc", "http"), default="http")
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    with (
        tempfile.TemporaryDirectory(prefix="tracegrade-profile-") as directory,
        running_server(Path(directory) / "profile.duckdb") as server,
    ):
        target = server.grpc_target if args.protocol == "grpc" else server.http_url
        loadgen = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "loadgen.py"),
                "--protocol",
                args.protocol,
                "--target",
                target,
                "--spans",
                str(args.spans),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        sampler = StackSampler()
        sampler.start()
        sql = "SELECT count(*) FROM spans"
        while query(server.http_url, sql)[0][0] < args.spans:
            time.sleep(0.25)
        stored_at = time.time()
        sampler.stopped.set()
        summary = json.loads(loadgen.communicate(timeout=600)[0].strip().splitlines()[-1])
        pending = server.server.writer.stats["pending_rebuilds"]
        shutdown = StackSampler()
        shutdown.start()
        started = time.monotonic()
        asyncio.run_coroutine_threadsafe(server.server.stop(), server.loop).result(3600)
        shutdown.stopped.set()
        stopped_in = time.monotonic() - started
    print(
        f"{args.spans / (stored_at - summary['first_send']):,.0f} spans/s stored; then {pending} trajectory "
        f"rebuilds pending, flushed in {stopped_in:.1f} s at shutdown"
    )
    print("\n######## while ingesting" + sampler.report(args.top))
    print("\n######## during the shutdown flush" + shutdown.report(args.top))


if __name__ == "__main__":
    main()
