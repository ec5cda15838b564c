"""Soak a real ``tracegrade serve`` under a steady mixed load and watch what it holds over time.

The server (a DuckDB file, or with ``--lake`` a DuckLake on PostgreSQL) runs with ``--tokens`` for two tenants.
Client processes send, until the soak ends: OTLP/gRPC and OTLP/HTTP protobuf exports from the real OpenTelemetry
exporters, OTLP/JSON posts, exports whose clients hang up mid-body, malformed requests, ``/v1/query`` queries
(answered, cut at the time limit, refused by the sandbox, hung up on while they run), UI pages and ``/ui/api/sql``,
MCP ``tools/call``, ``/metrics`` scrapes, ``POST /v1/forget`` and ``tracegrade runs``/``traces`` through the
server (file store only: a lake has no single holder). The tokens file is rewritten and reloaded with SIGHUP
every minute. Every ``--sample`` seconds one row: the server's VmRSS, threads, open fds (sockets, pipes, anon
inodes, files), the files of its temp directory, its journal's size. At the end, a slope per column over the
samples after the warm-up and the RSS floor (each minute's lowest sample), then a SIGTERM under load (exit code,
seconds to exit, files left in the temp directory), a restart that replays the journal, and a check span by span
that every acknowledged span is stored exactly once. Run from the checkout root:

    python bench/soak_receiver.py --minutes 12
    python bench/soak_receiver.py --minutes 12 --lake "$(cat /work/helpers/pg_dsn)"
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support when run as a script

from tests.support.export_load import make_batches, stored_span_counts
from tests.support.lake_serve import LakeServerProcess, lake_span_counts
from tests.support.pg_cluster import PgServer
from tests.support.posted_query import PostedQuery, mcp_run_sql
from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import span_json, traces_json
from tests.support.tenant_traffic import write_tokens

TENANTS = {"acme": "acme-soak-token-0123456789", "globex": "globex-soak-token-0123456789"}
RUNAWAY = "SELECT count(*) FROM range(1000000000) a, range(1000000000) b WHERE a.range + b.range = -1"
REFUSED = "SELECT count(*) FROM main.spans"
QUERY_TIMEOUT = 3.0
ANSWERS: Counter[str] = Counter()  # a client's answers by what it sent and the status
WARM_UP = 120.0  # seconds left out of the slopes
CLIENT_KINDS = ("grpc", "http", "grpc", "json", "misc", "queries")


# --- clients (each a process of its own: ``soak_receiver.py client KIND ...``) --------------------------------


def _acked_exports(kind: str, http_url: str, grpc_target: str, token: str, stop: Path) -> list[list[str]]:
    """Export traces of four spans with the real OTLP exporter of ``kind`` until ``stop`` exists; the
    acknowledged spans' ids."""
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
    from opentelemetry.sdk.trace.export import SpanExportResult

    if kind == "grpc":
        exporter: Any = GrpcSpanExporter(
            endpoint=grpc_target, insecure=True, headers=(("authorization", f"Bearer {token}"),), timeout=30
        )
    else:
        exporter = HttpSpanExporter(
            endpoint=f"{http_url}/v1/traces", headers={"Authorization": f"Bearer {token}"}, timeout=30
        )
    acked: list[list[str]] = []
    while not stop.exists():
        for batch in make_batches(50, 4, payload_bytes=300):
            if stop.exists():
                break
            if exporter.export(batch) == SpanExportResult.SUCCESS:
                acked.extend([f"{s.context.trace_id:032x}", f"{s.context.span_id:016x}"] for s in batch)
            time.sleep(0.1)
    exporter.shutdown()
    return acked


def _json_post(http_url: str, token: str, acked: list[list[str]]) -> None:
    trace_id = uuid.uuid4().hex
    spans = [span_json(trace_id, index) for index in range(3)]
    body = json.dumps(traces_json(spans, "soak-json")).encode()
    reply = post(f"{http_url}/v1/traces", body, "application/json", token=token)
    if reply.status == 200 and not reply.json().get("partialSuccess"):
        acked.extend([trace_id, span["spanId"]] for span in spans)
    time.sleep(0.1)


def _post(label: str, url: str, body: bytes, content_type: str = "application/x-protobuf", token: str = "") -> Any:
    """``post``, its status counted under ``label`` (printed when the client ends)."""
    reply = post(url, body, content_type, token=token)
    ANSWERS[f"{label} {reply.status}"] += 1
    return reply


def _hang_up_mid_body(http_url: str, token: str) -> None:
    port = int(http_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/x-protobuf\r\n"
            + f"Authorization: Bearer {token}\r\nContent-Length: 100000\r\n\r\n".encode()
            + b"\x0a" * 1000
        )


def _malformed(http_url: str, token: str) -> None:
    url = f"{http_url}/v1/traces"
    _post("garbage protobuf", url, b"\xff\x00garbage", token=token)
    _post("cut JSON", url, b'{"resourceSpans": [', "application/json", token=token)
    _post("xml", url, b"<xml/>", "text/xml", token=token)
    _post("wrong token", url, b"{}", "application/json", token="wrong-token-of-nobody")
    port = int(http_url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(
            b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n12345"
        )
        connection.recv(1000)


def _misc(http_url: str, token: str) -> None:
    """Hang-ups, malformed requests, UI pages, MCP calls, /metrics, forget of its own traces."""
    bearer = {"Authorization": f"Bearer {token}"}
    _hang_up_mid_body(http_url, token)
    _malformed(http_url, token)
    trace_id = uuid.uuid4().hex
    post(
        f"{http_url}/v1/traces",
        json.dumps(traces_json([span_json(trace_id, 0)], "soak-forget")).encode(),
        "application/json",
        token=token,
    )
    _post("forget", f"{http_url}/v1/forget", json.dumps({"trace_ids": [trace_id]}).encode(), "application/json", token)
    for page in ("/ui/", "/ui/runs", "/ui/sql", "/ui/api/traces", "/ui/api/facets"):
        _get(http_url + page, bearer)
    _post(
        "ui sql",
        f"{http_url}/ui/api/sql",
        json.dumps({"sql": "SELECT count(*) FROM spans"}).encode(),
        "application/json",
        token,
    )
    call = mcp_run_sql(http_url, token, "SELECT count(*) FROM trajectories")
    ANSWERS[f"mcp {call.answer_text()[0]}"] += 1
    call.hang_up()
    _get(f"{http_url}/metrics", {})
    time.sleep(0.5)


def _queries(http_url: str, token: str, turn: int, store: str) -> None:
    """Queries answered, cut at the time limit, refused, hung up on; store commands through the server."""
    url = f"{http_url}/v1/query"
    _post(
        "query",
        url,
        json.dumps({"sql": "SELECT count(*), max(end_time) FROM spans"}).encode(),
        "application/json",
        token,
    )
    _post("refused query", url, json.dumps({"sql": REFUSED}).encode(), "application/json", token)
    if turn % 3 == 0:
        _post("runaway query", url, json.dumps({"sql": RUNAWAY}).encode(), "application/json", token)
    else:
        hung = PostedQuery(http_url, "/v1/query", token, RUNAWAY)
        time.sleep(0.5)
        hung.hang_up()
    if turn % 5 == 0 and not store.startswith("ducklake:"):
        env = {**os.environ, "TRACEGRADE_TOKEN": token}
        for command in ("runs", "traces"):
            done = subprocess.run(
                [sys.executable, "-m", "tracegrade.cli.main", command, "--store", store],
                env=env,
                capture_output=True,
                timeout=120,
            )
            ANSWERS[f"tracegrade {command} exit {done.returncode}"] += 1
    time.sleep(0.5)


def _get(url: str, headers: dict[str, str]) -> None:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=60) as response:
            response.read()
            ANSWERS[f"GET {urllib.parse.urlsplit(url).path} {response.status}"] += 1
    except urllib.error.HTTPError as error:
        error.read()
        ANSWERS[f"GET {urllib.parse.urlsplit(url).path} {error.code}"] += 1
    except OSError:
        pass


def _until_stopped(step: Callable[[], None], stop: Path) -> None:
    """``step`` again and again until ``stop`` exists; a step the server refused a connection (it is stopping or
    restarting) is tried again a second later."""
    while not stop.exists():
        try:
            step()
        except (OSError, http.client.HTTPException):
            time.sleep(1)


def run_client(kind: str, http_url: str, grpc_target: str, token: str, stop: Path, out: Path, store: str) -> None:
    acked: list[list[str]] = []
    if kind in ("grpc", "http"):
        acked = _acked_exports(kind, http_url, grpc_target, token, stop)
    elif kind == "json":
        _until_stopped(lambda: _json_post(http_url, token, acked), stop)
    elif kind == "misc":
        _until_stopped(lambda: _misc(http_url, token), stop)
    else:
        turns = itertools.count(1)
        _until_stopped(lambda: _queries(http_url, token, next(turns), store), stop)
    out.write_text(json.dumps(acked))
    print(kind, dict(sorted(ANSWERS.items())), file=sys.stderr)


# --- the soak -------------------------------------------------------------------------------------------------


def fd_kinds(pid: int) -> tuple[dict[str, int], list[str]]:
    """The process's open fds by kind, and the files among them."""
    kinds = {"socket": 0, "pipe": 0, "anon": 0, "file": 0}
    files = []
    for entry in os.scandir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(entry.path)
        except OSError:
            continue
        if target.startswith("socket:"):
            kinds["socket"] += 1
        elif target.startswith("pipe:"):
            kinds["pipe"] += 1
        elif target.startswith("anon_inode:"):
            kinds["anon"] += 1
        else:
            kinds["file"] += 1
            files.append(target)
    return kinds, files


def status_field(pid: int, name: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(name + ":"):
            return int(line.split()[1])
    raise KeyError(name)


def tree_size(path: Path) -> tuple[int, int]:
    """Files under ``path`` and their bytes."""
    count = size = 0
    for root, _dirs, names in os.walk(path):
        for name in names:
            try:
                size += os.stat(os.path.join(root, name)).st_size
                count += 1
            except OSError:
                pass
    return count, size


def sample(pid: int, temp_dir: Path, journal: Path) -> dict[str, Any]:
    kinds, files = fd_kinds(pid)
    temp_files, temp_bytes = tree_size(temp_dir)
    journal_bytes = tree_size(journal)[1]
    return {
        "rss_mb": status_field(pid, "VmRSS") / 1024,
        "threads": status_field(pid, "Threads"),
        "fds": sum(kinds.values()),
        **{f"fd_{kind}": count for kind, count in kinds.items()},
        "tmp_files": temp_files,
        "tmp_mb": temp_bytes / 2**20,
        "journal_mb": journal_bytes / 2**20,
        "files": sorted(files),
    }


def slope_per_minute(times: list[float], values: list[float]) -> float:
    """Least-squares slope of ``values`` over ``times`` (seconds), per minute."""
    n = len(times)
    if n < 2:
        return 0.0
    mean_t, mean_v = sum(times) / n, sum(values) / n
    spread = sum((t - mean_t) ** 2 for t in times)
    return 60 * sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values)) / spread if spread else 0.0


COLUMNS = (
    "rss_mb",
    "threads",
    "fds",
    "fd_socket",
    "fd_pipe",
    "fd_anon",
    "fd_file",
    "tmp_files",
    "tmp_mb",
    "journal_mb",
)


def print_row(elapsed: float, row: dict[str, Any]) -> None:
    cells = [f"{elapsed:6.0f}"] + [f"{row[c]:.1f}" if isinstance(row[c], float) else str(row[c]) for c in COLUMNS]
    print(" ".join(f"{cell:>10}" for cell in cells), flush=True)


def write_tokens_file(path: Path, generation: int) -> None:
    """Both tenants' tokens, and a rotating spare token, so each reload changes the table."""
    write_tokens(
        path, {"acme": [TENANTS["acme"], f"acme-spare-{generation:04d}-abcdefgh"], "globex": [TENANTS["globex"]]}
    )


def soak(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="tracegrade-soak-"))
    tokens = workdir / "tokens.yaml"
    write_tokens_file(tokens, 0)
    options = (
        "--tokens",
        str(tokens),
        "--query-timeout",
        str(QUERY_TIMEOUT),
        "--shutdown-timeout",
        str(args.shutdown_timeout),
    )
    server: ServerProcess
    if args.lake:
        location = f"ducklake:postgres:{PgServer(args.lake).new_database()}"
        journal = workdir / "journal"
        server = LakeServerProcess(location, workdir / "lake-data", journal, extra_args=options)
        # an in-memory DuckDB spills to .tmp in its working directory (the journal's parent)
        store, temp_dir, journal_dir = location, workdir / ".tmp", journal
    else:
        store_path = workdir / "soak.duckdb"
        server = ServerProcess(store_path, extra_args=options)
        store, temp_dir, journal_dir = str(store_path), Path(f"{store_path}.tmp"), Path(f"{store_path}.journal")
    server.start()
    print(f"server pid {server.pid}, store {store}, work {workdir}", flush=True)
    stop = workdir / "stop"
    clients = []
    for number, kind in enumerate(CLIENT_KINDS):
        tenant = list(TENANTS)[number % 2]
        out = workdir / f"client-{number}-{kind}-{tenant}.json"
        command = [
            sys.executable,
            __file__,
            "client",
            kind,
            server.http_url,
            server.grpc_target,
            TENANTS[tenant],
            str(stop),
            str(out),
            store,
        ]
        with open(workdir / f"client-{number}.log", "wb") as log:  # the child keeps its own copy of the fd
            clients.append((tenant, out, subprocess.Popen(command, stderr=log)))
    print(" ".join(f"{c:>10}" for c in ("seconds", *COLUMNS)), flush=True)
    samples: list[tuple[float, dict[str, Any]]] = []
    started = last_reload = time.monotonic()
    generation = 0
    while (elapsed := time.monotonic() - started) < args.minutes * 60:
        row = sample(server.pid, temp_dir, journal_dir)
        samples.append((elapsed, row))
        print_row(elapsed, row)
        if time.monotonic() - last_reload >= 60:
            generation += 1
            write_tokens_file(tokens, generation)
            os.kill(server.pid, signal.SIGHUP)
            last_reload = time.monotonic()
        time.sleep(args.sample)
    print("files open at the end:", *samples[-1][1]["files"], sep="\n  ")
    warm_up = min(WARM_UP, args.minutes * 30)
    late = [(t, row) for t, row in samples if t >= warm_up]
    print(f"\nslope per minute after {warm_up:.0f} s of warm-up ({len(late)} samples):")
    for column in COLUMNS:
        first, last = late[0][1][column], late[-1][1][column]
        slope = slope_per_minute([t for t, _ in late], [row[column] for _, row in late])
        print(f"  {column:>10}: {slope:+9.3f}/min   ({first:.1f} -> {last:.1f})")
    # RSS swings by 100-200 MB with each query and checkpoint: its floor (each minute's lowest sample) shows a
    # leak sooner than a slope through the swings
    floors: dict[int, float] = {}
    for t, row in late:
        floors[int(t // 60)] = min(floors.get(int(t // 60), row["rss_mb"]), row["rss_mb"])
    floor_slope = slope_per_minute([60.0 * minute for minute in floors], list(floors.values()))
    print(f"  RSS floor by minute: {' '.join(f'{v:.0f}' for v in floors.values())} MB ({floor_slope:+.2f} MB/min)")
    return shutdown_and_check(args, server, store, temp_dir, stop, clients)


def shutdown_and_check(
    args: argparse.Namespace,
    server: ServerProcess,
    store: str,
    temp_dir: Path,
    stop: Path,
    clients: list[tuple[str, Path, subprocess.Popen[bytes]]],
) -> int:
    """SIGTERM under load, a restart that replays the journal, then every acknowledged span stored once."""
    assert server.process is not None
    began = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    code = server.process.wait(args.shutdown_timeout + 60)
    took = time.monotonic() - began
    left = sorted(str(p) for p in temp_dir.rglob("*")) if temp_dir.exists() else []
    print(
        f"\nSIGTERM under load: exit code {code} after {took:.1f} s (grace {args.shutdown_timeout:.0f} s); "
        f"temp directory {'absent' if not temp_dir.exists() else f'holds {len(left)} entries {left[:5]}'}"
    )
    stop.touch()
    acked: dict[str, list[tuple[str, str]]] = {tenant: [] for tenant in TENANTS}
    for tenant, out, process in clients:
        process.wait(300)
        acked[tenant].extend(tuple(ids) for ids in json.loads(out.read_text()))  # type: ignore[misc]
    server.start()  # replays the journal before it listens
    server.terminate()
    problems = 0
    for tenant, spans in acked.items():
        # a lake's counts are tenant-blind: the acknowledged ids are random, so two tenants' never clash
        stored = lake_span_counts(store) if store.startswith("ducklake:") else stored_span_counts(Path(store), tenant)
        missing = [ids for ids in spans if ids not in stored]
        doubled = [ids for ids, count in stored.items() if count != 1]
        problems += len(missing) + len(doubled)
        print(f"{tenant}: {len(spans)} spans acknowledged, {len(missing)} missing, {len(doubled)} stored twice")
    return 1 if problems or code != 0 else 0


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "client":
        kind, http_url, grpc_target, token, stop, out, store = sys.argv[2:9]
        run_client(kind, http_url, grpc_target, token, Path(stop), Path(out), store)
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=12.0)
    parser.add_argument("--sample", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--lake", metavar="PG_DSN", help="soak a lake whose catalog is on this PostgreSQL")
    parser.add_argument("--shutdown-timeout", type=float, default=30.0)
    return soak(parser.parse_args())


if __name__ == "__main__":
    raise SystemExit(main())
