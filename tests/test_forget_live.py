"""Forgetting traces through a running ``tracegrade serve``: ``POST /v1/forget`` and ``tracegrade forget``.

A real receiver fed by a real OTLP exporter; a forgotten trace's spans sent again are acknowledged and dropped;
a receiver SIGKILLed while its request journal still holds such spans replays them at start and stores none;
each tenant forgets its own traces only; bad requests get a precise refusal and the server keeps serving.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tests.support import pg_cluster
from tests.support.lake_serve import LakeServerProcess
from tests.support.pg_cluster import PgServer
from tests.support.reporters_samples import passing_case
from tests.support.server_otlp import HttpReply, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, receiver_metric, span_json, traces_json
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_until
from tracegrade.cli.main import cli
from tracegrade.models.results import EvalReport
from tracegrade.store import StoreWriter, TraceStore
from tracegrade.store.journal import journal_directory
from tracegrade.store.lake import LakeStore

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

SPANS_PER_TRACE = 3
KILL_ATTEMPTS = 5  # a kill that comes after the journal let go of the spans proves nothing: try again


def _send_traces(grpc_target: str, count: int, token: str | None = None) -> dict[str, set[str]]:
    """``count`` traces of SPANS_PER_TRACE spans through a real OTLP/gRPC exporter, each acknowledged."""
    provider = TracerProvider(resource=Resource.create({"service.name": "forget-test"}))
    headers = {"authorization": f"Bearer {token}"} if token else None
    exporter = OTLPSpanExporter(endpoint=grpc_target, insecure=True, headers=headers)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("forget-test")
    sent: dict[str, set[str]] = {}
    for _ in range(count):
        with tracer.start_as_current_span("agent") as root:
            ids = {f"{root.get_span_context().span_id:016x}"}
            for _ in range(SPANS_PER_TRACE - 1):
                with tracer.start_as_current_span("tool") as tool:
                    ids.add(f"{tool.get_span_context().span_id:016x}")
        sent[f"{root.get_span_context().trace_id:032x}"] = ids
    provider.shutdown()
    return sent


def _forget(http_url: str, body: object, token: str | None = None, content_type: str = "application/json") -> HttpReply:
    return post(f"{http_url}/v1/forget", json.dumps(body).encode(), content_type, token=token)


def _stored(http_url: str, token: str | None = None) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for trace_id, span_id in query(http_url, "SELECT trace_id, span_id FROM spans", token=token):
        found.setdefault(trace_id, set()).add(span_id)
    return found


def _record_run(http_url: str, run_id: str, trace_id: str, token: str) -> None:
    """Record a run people made (``POST /v1/runs``, as ``grade`` does) whose one case graded ``trace_id``."""
    case = passing_case()
    case.trace_ids = [trace_id]
    report = EvalReport.create("ci", [case]).model_dump(mode="json")
    body = json.dumps({"report": report, "kind": "eval_set", "run_id": run_id}).encode()
    recorded = post(f"{http_url}/v1/runs", body, "application/json", token=token)
    assert recorded.status == 200, recorded.body


def _late_spans(trace_id: str) -> bytes:
    """Spans of ``trace_id`` an exporter still had (OTLP/JSON)."""
    return json.dumps(traces_json([span_json(trace_id, 100 + i) for i in range(SPANS_PER_TRACE)])).encode()


def test_a_forgotten_trace_is_gone_and_its_late_spans_never_come_back_even_through_a_crash(tmp_path: Path) -> None:
    store = tmp_path / "traces.duckdb"
    server = ServerProcess(store).start()
    try:
        sent = _send_traces(server.grpc_target, 3)
        forgotten, *kept = sent
        assert _stored(server.http_url) == sent

        reply = _forget(server.http_url, {"trace_ids": [forgotten.upper()]})  # ids as another tool may show them

        assert reply.status == 200, reply.body
        assert reply.json()["forgotten"]["traces"] == 1
        assert reply.json()["forgotten"]["spans"] == SPANS_PER_TRACE
        assert _stored(server.http_url) == {trace_id: sent[trace_id] for trace_id in kept}
        assert query(server.http_url, "SELECT trace_id FROM traces WHERE trace_id = ?", [forgotten]) == []
        assert receiver_metric(server.http_url, "traces_forgotten_total") == 1

        # an exporter's late spans of the trace: acknowledged (nothing to retry), and dropped
        late = post(f"{server.http_url}/v1/traces", _late_spans(forgotten), "application/json")
        assert late.status == 200, late.body
        wait_until(
            lambda: receiver_metric(server.http_url, "spans_dropped_forgotten_total") == SPANS_PER_TRACE,
            "the late spans to be counted as dropped",
        )
        assert forgotten not in _stored(server.http_url)

        # killed while its journal still holds late spans: the replay at start must drop them too
        for _ in range(KILL_ATTEMPTS):
            assert post(f"{server.http_url}/v1/traces", _late_spans(forgotten), "application/json").status == 200
            server.kill()
            segments = list(journal_directory(store).glob("*.tgj"))
            held = any(forgotten.encode() in segment.read_bytes() for segment in segments)
            server = ServerProcess(store, grpc_port=server.grpc_port, http_port=server.http_port).start()
            if held:
                break
        assert held, f"the journal never held the late spans at the kill, in {KILL_ATTEMPTS} attempts"
        assert "replayed" in server.log()
        assert _stored(server.http_url) == {trace_id: sent[trace_id] for trace_id in kept}
        assert server.terminate() == 0
    finally:
        server.kill()
    with TraceStore(store, read_only=True) as reader:
        assert reader.query("SELECT count(*) FROM spans WHERE trace_id = ?", [forgotten]).rows == [(0,)]
        assert reader.query("SELECT trace_id FROM forgotten_traces").rows == [(forgotten,)]


def test_each_tenant_forgets_its_own_traces_only(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tenants:\n  acme: [acme-token-0123456789]\n  umbrella: [umbrella-token-0123456789]\n")
    with ServerProcess(tmp_path / "traces.duckdb", extra_args=("--tokens", str(tokens))) as server:
        same_trace = "0123456789abcdef0123456789abcdef"
        for token in ("acme-token-0123456789", "umbrella-token-0123456789"):
            body = json.dumps(traces_json([span_json(same_trace, i) for i in range(SPANS_PER_TRACE)])).encode()
            assert post(f"{server.http_url}/v1/traces", body, "application/json", token=token).status == 200

        assert _forget(server.http_url, {"trace_ids": [same_trace]}).status == 401
        reply = _forget(server.http_url, {"trace_ids": [same_trace]}, token="acme-token-0123456789")
        assert reply.status == 200 and reply.json()["forgotten"]["spans"] == SPANS_PER_TRACE

        assert _stored(server.http_url, "acme-token-0123456789") == {}
        assert len(_stored(server.http_url, "umbrella-token-0123456789")[same_trace]) == SPANS_PER_TRACE
        assert query(server.http_url, "SELECT trace_id FROM forgotten_traces", token="umbrella-token-0123456789") == []


@pytest.mark.parametrize(
    ("body", "content_type", "status", "message"),
    [
        ({"trace_ids": []}, "application/json", 400, "$.trace_ids is empty"),
        ({"trace_ids": ["ok", 7]}, "application/json", 400, "$.trace_ids[1] must be a trace id"),
        ({"trace_ids": ["a"], "tenant": "x"}, "application/json", 400, "['tenant']; only trace_ids, delete_runs may"),
        (
            {"trace_ids": ["a"], "delete_runs": "yes"},
            "application/json",
            400,
            '$.delete_runs must be true or false; got "yes"',
        ),
        (["a"], "application/json", 400, 'a JSON object {"trace_ids"'),
        ({"trace_ids": ["a"]}, "text/plain", 415, "Content-Type: application/json"),
    ],
)
def test_a_bad_request_to_forget_is_refused_precisely_and_deletes_nothing(
    tmp_path: Path, body: object, content_type: str, status: int, message: str
) -> None:
    with ServerProcess(tmp_path / "traces.duckdb") as server:
        sent = _send_traces(server.grpc_target, 1)
        reply = _forget(server.http_url, body, content_type=content_type)
        assert reply.status == status and message in reply.json()["error"], reply.body
        broken = post(f"{server.http_url}/v1/forget", b"{not json", "application/json")
        assert broken.status == 400 and "not valid JSON" in broken.json()["error"]
        assert _stored(server.http_url) == sent  # still serving, nothing deleted


def test_the_forget_command_asks_the_server_that_holds_the_file_and_opens_a_file_none_holds(tmp_path: Path) -> None:
    store = tmp_path / "traces.duckdb"
    runner = CliRunner()
    with ServerProcess(store, extra_args=("--token", "a-token-of-twenty-chars")) as server:
        first, second = _send_traces(server.grpc_target, 2, "a-token-of-twenty-chars")
        refused = runner.invoke(cli, ["forget", "--store", str(store), first])
        assert refused.exit_code != 0 and "pass its token with --token" in refused.output
        wait_until(
            lambda: len(query(server.http_url, "SELECT trace_id FROM traces", token="a-token-of-twenty-chars")) == 2,
            "both trajectories to be built",
        )
        _record_run(server.http_url, "ci-run", first, "a-token-of-twenty-chars")
        through = ["forget", "--store", str(store), "--token", "a-token-of-twenty-chars"]
        dry = runner.invoke(cli, [*through, "--where", "service_name = 'forget-test'", "--dry-run"])
        assert dry.exit_code == 0, dry.output
        assert dry.output.startswith("would forget 2 trace(s): ") and first in dry.output and second in dry.output
        assert (
            "recorded run(s) that graded them, which it would keep (--delete-runs deletes them): ci-run" in dry.output
        )
        done = runner.invoke(cli, [*through, first])
        assert done.exit_code == 0, done.output
        assert f"forgot 1 trace(s): {SPANS_PER_TRACE} span(s)" in done.output
        assert "kept 1 recorded run(s) that graded these traces" in done.output and "ci-run" in done.output
        assert "until `tracegrade maintain --purge-deleted` rewrites it" in done.output
        assert set(_stored(server.http_url, "a-token-of-twenty-chars")) == {second}
        again = runner.invoke(cli, [*through, first, "--delete-runs"])
        assert again.exit_code == 0 and "1 recorded run(s)" in again.output and "kept" not in again.output, again.output
        runs = query(server.http_url, "SELECT run_id FROM eval_runs", token="a-token-of-twenty-chars")
        assert runs == []
    ids = tmp_path / "ids.txt"
    ids.write_text(f"{second}\n\n")
    by_span = "trace_id IN (SELECT trace_id FROM spans WHERE name = 'tool')"  # a span attribute, user.id say
    spans_dry = runner.invoke(cli, ["forget", "--store", str(store), "--where", by_span, "--dry-run"])
    assert spans_dry.exit_code == 0 and spans_dry.output == f"would forget 1 trace(s): {second}\n", spans_dry.output
    nothing = runner.invoke(cli, ["forget", "--store", str(store), "--where", "status = 'no such status'"])
    assert nothing.exit_code == 0 and "no trace matched" in nothing.output
    bad = runner.invoke(cli, ["forget", "--store", str(store), "--where", "no_such_column = 1"])
    assert bad.exit_code == 2 and "is not a valid predicate over the traces table" in bad.output
    offline = runner.invoke(cli, ["forget", "--store", str(store), "--ids-from", str(ids), "--where", "true"])
    assert offline.exit_code == 0, offline.output  # no server now; the id and the selection are one trace
    assert f"forgot 1 trace(s): {SPANS_PER_TRACE} span(s)" in offline.output
    with TraceStore(store, read_only=True) as reader:
        assert reader.query("SELECT count(*) FROM spans").rows == [(0,)]
    missing = runner.invoke(cli, ["forget", "--store", str(tmp_path / "nope.duckdb"), first])
    assert missing.exit_code != 0 and "nope.duckdb" in missing.output
    empty = runner.invoke(cli, ["forget", "--store", str(store)])
    assert empty.exit_code == 2 and "give the ids of the traces to forget" in empty.output


def _send_unbuilt(server: ServerProcess, trace_ids: list[str], token: str) -> None:
    """One span with a parent per trace, stored: the server builds each trace a second after its span (no root
    span says it ended)."""
    spans = [span_json(trace_id, 1, parentSpanId=f"{99:016x}") for trace_id in trace_ids]
    body = json.dumps(traces_json(spans, service="unbuilt")).encode()
    assert post(f"{server.http_url}/v1/traces", body, "application/json", token=token).status == 200
    stored = "SELECT count(*) FROM spans WHERE service_name = 'unbuilt'"
    wait_until(lambda: query(server.http_url, stored, token=token) == [[len(trace_ids)]], "the spans stored", 30)
    assert query(server.http_url, "SELECT count(*) FROM traces", token=token) == [[0]]  # not built yet


def test_forget_where_through_a_server_waits_for_the_trajectories_still_waiting(tmp_path: Path) -> None:
    token = "a-token-of-twenty-chars"
    with ServerProcess(tmp_path / "traces.duckdb", extra_args=("--token", token)) as server:
        _send_unbuilt(server, [trace_hex(7)], token)
        through = ["forget", "--store", str(server.store), "--token", token, "--where", "service_name = 'unbuilt'"]
        done = CliRunner().invoke(cli, through)
        assert done.exit_code == 0, done.output
        assert "waiting for the server to build the trajectories of 1 trace(s), so that --where sees them" in (
            done.output
        )
        assert "forgot 1 trace(s): 1 span(s)" in done.output
        assert _stored(server.http_url, token) == {}


def test_forget_where_says_what_it_may_miss_when_the_server_cannot_say_which_traces_wait(tmp_path: Path) -> None:
    token = "a-token-of-twenty-chars"
    limited = ("--token", token, "--query-max-rows", "1")  # two waiting traces are more rows than it returns
    with ServerProcess(tmp_path / "traces.duckdb", extra_args=limited) as server:
        _send_unbuilt(server, [trace_hex(8), trace_hex(9)], token)
        where = f"trace_id = '{trace_hex(8)}'"
        done = CliRunner().invoke(cli, ["forget", "--store", str(server.store), "--token", token, "--where", where])
        assert done.exit_code == 0, done.output
        assert "warning: could not ask the server which traces still wait for their trajectory" in done.output
        assert "--query-max-rows" in done.output and "--where may miss the newest traces" in done.output


def test_forget_on_a_lake_while_another_receiver_writes_loses_nothing_else_and_drops_its_late_spans(
    pg_server: PgServer, tmp_path: Path
) -> None:
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    receiver = LakeStore(location, data_path=data)  # another receiver of the lake: its own store and writer
    writer = StoreWriter(receiver, commit_seconds=0, settle_seconds=0.05, root_settle_seconds=0.05)
    writer.start()

    def trace(n: int) -> list:
        return [make_span(n, n * 10, name="agent"), *(make_span(n, n * 10 + i, parent=n * 10) for i in (1, 2))]

    writer.submit(trace(1)).result(timeout=120)
    written: list[int] = []
    stop = threading.Event()

    def keep_writing() -> None:  # commits all through the forget: the lake's write gate lets both through
        n = 2
        while not stop.is_set():
            writer.submit(trace(n)).result(timeout=120)
            written.append(n)
            n += 1

    thread = threading.Thread(target=keep_writing)
    thread.start()
    try:
        wait_until(lambda: len(written) >= 3, "the other receiver to commit")
        done = CliRunner().invoke(cli, ["forget", "--store", location, "--lake-data", str(data), trace_hex(1)])
        wait_until(lambda: len(written) >= 6, "the other receiver to commit after the forget")
    finally:
        stop.set()
        thread.join(120)
    assert done.exit_code == 0, done.output
    assert "forgot 1 trace(s): 3 span(s)" in done.output

    late = writer.submit(trace(1)).result(timeout=120)  # that receiver's late copy of the forgotten trace
    assert (late.spans_inserted, late.spans_forgotten) == (0, 3)
    writer.close()
    with LakeStore(location, read_only=True) as reader:
        stored = {row[0] for row in reader.query("SELECT DISTINCT trace_id FROM spans").rows}
    assert stored == {trace_hex(n) for n in written}


def test_a_forget_right_after_an_acknowledged_export_to_a_lake_counts_its_spans(
    pg_server: PgServer, tmp_path: Path
) -> None:
    """A receiver acknowledges an export once it is journaled, and a lake's writer gathers a second of them into a
    commit: a forget sent at once waits for what was acknowledged before it, so its answer counts those spans."""
    location = f"ducklake:postgres:{pg_server.new_database()}"
    with LakeServerProcess(location, tmp_path / "lake-data", tmp_path / "receiver.journal") as server:
        for attempt in range(3):
            trace = f"{attempt + 1:032x}"  # an all-zero trace id is no trace id
            body = json.dumps(traces_json([span_json(trace, i) for i in range(SPANS_PER_TRACE)])).encode()
            assert post(f"{server.http_url}/v1/traces", body, "application/json").status == 200
            reply = _forget(server.http_url, {"trace_ids": [trace]})
            assert reply.status == 200 and reply.json()["forgotten"]["spans"] == SPANS_PER_TRACE, reply.body
        assert _stored(server.http_url) == {}
