"""``tracegrade rebuild`` on a DuckDB store file that a running ``tracegrade serve`` holds: the server rebuilds the
trajectories itself (``POST /v1/rebuild``), in steps beside its ingest, and streams its progress to the command.

A real receiver in a subprocess, real OTLP/HTTP exporters sending all along, traces whose trajectories an "older
mapper" built (``tests.support.outdated_trajectories``). Every trace is mapped again, every acknowledged span is
stored once; a tenant's token rebuilds only its tenant's traces; tokens without the ``record`` scope, wrong tokens,
a second rebuild (409) and a lake receiver are refused precisely; a rebuild stopped by SIGTERM to the receiver, by
its SIGKILL or by its client hanging up keeps its committed steps, and the same command finishes it.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from click.testing import Result
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

from tests.support import pg_cluster
from tests.support.export_load import ExportLoad, assert_stored_once, make_batches
from tests.support.grading_cli import run_cli
from tests.support.lake_serve import LakeServerProcess
from tests.support.outdated_trajectories import current_count, read_until, rebuild_process, store_outdated
from tests.support.pg_cluster import PgServer
from tests.support.server_otlp import post
from tests.support.server_process import ServerProcess
from tests.support.waiting import wait_until
from tracegrade.store import TraceStore
from tracegrade.trajectory import MAPPER_REVISION

TOKEN = "rebuild-test-token-acme-every-scope-0123456789"
NO_RECORD = "rebuild-test-token-acme-ingest-read-0123456789"  # may send and read, not write derived rows
GLOBEX = "rebuild-test-token-globex-every-scope-0123456789"
pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)


def _server(store: Path, tmp_path: Path) -> ServerProcess:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        f"tenants:\n  acme:\n    - {TOKEN}\n    - {{token: {NO_RECORD}, scopes: [ingest, read]}}\n"
        f"  globex:\n    - {GLOBEX}\n"
    )
    return ServerProcess(store, extra_args=("--tokens", str(tokens)))


def _outdated_store(path: Path, acme: int, globex: int = 0) -> dict[str, set[str]]:
    """A store file of ``acme`` traces of tenant acme (then ``globex`` of globex) an older mapper built; each trace
    id with its span ids."""
    with TraceStore(path) as store:
        spans_of = store_outdated(store, acme, tenant="acme")
        if globex:
            spans_of |= store_outdated(store, globex, tenant="globex", first=acme + 1)
    return spans_of


def _exporting(server: ServerProcess) -> ExportLoad:
    """A real OTLP/HTTP exporter sending one trace a request as acme, each sent again until acknowledged."""
    exporter = OTLPSpanExporter(
        endpoint=f"{server.http_url}/v1/traces", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    load = ExportLoad(exporter, make_batches(3000, 3), pause=0.02, resend=True)
    load.start()
    return load


def _stopped(load: ExportLoad) -> ExportLoad:
    load.stop()
    load.join(120)
    assert not load.is_alive()
    return load


def _current(path: Path, spans_of: dict[str, set[str]]) -> int:
    """How many of the traces are built by this mapper (each checked whole: see ``current_count``)."""
    with TraceStore(path, read_only=True) as store:
        return current_count(store, spans_of)


def _rebuild(store: Path, *args: str) -> Result:
    return run_cli("rebuild", "--store", store, *args)


def test_a_rebuild_through_the_server_maps_every_old_trajectory_again_while_exports_go_on(tmp_path: Path) -> None:
    path = tmp_path / "traces.duckdb"
    spans_of = _outdated_store(path, 600)
    with _server(path, tmp_path) as server:
        load = _exporting(server)
        try:
            wait_until(lambda: load.acked_batches >= 10, "exports acknowledged before the rebuild")
            rebuilt = _rebuild(path, "--token", TOKEN, "--batch", "100")
            assert rebuilt.exit_code == 0, rebuilt.output
            during = load.acked_batches
            wait_until(lambda: load.acked_batches >= during + 10, "exports acknowledged after the rebuild")
        finally:
            _stopped(load)
        assert rebuilt.stdout.splitlines() == [
            "rebuilding the trajectories built by an older mapper of tenant acme by the server at "
            f"{server.http_url}: 600 trace(s), "
            f"with mapper revision {MAPPER_REVISION}",
            *(f"rebuilt {done} of 600 trace(s)" for done in range(100, 601, 100)),
            f"rebuilt the trajectories of 600 trace(s) with mapper revision {MAPPER_REVISION}",
            "their spans were mapped in 6 batch(es) (the server's --mapping-batch-bytes)",
        ]
        again = _rebuild(path, "--token", TOKEN)
        assert again.exit_code == 0, again.output
        assert again.stdout.startswith("no trajectory of tenant acme is built by an older mapper; nothing to rebuild")
        assert server.terminate() == 0, server.log()
    assert "rebuilding 600 trace(s) with mapper revision" in server.log()
    assert _current(path, spans_of) == 600
    assert_stored_once(path, load.acked)


def test_a_tenants_token_rebuilds_its_tenants_traces_and_refusals_say_why(tmp_path: Path) -> None:
    path = tmp_path / "traces.duckdb"
    spans_of = _outdated_store(path, 30, globex=20)
    with _server(path, tmp_path) as server:
        no_scope = _rebuild(path, "--token", NO_RECORD)
        wrong_token = _rebuild(path, "--token", "not-a-token-of-this-server-0123456789")
        other_tenant = _rebuild(path, "--token", TOKEN, "--tenant", "globex")
        batch_bytes = _rebuild(path, "--token", TOKEN, "--mapping-batch-bytes", "1MiB")
        bad_body = post(f"{server.http_url}/v1/rebuild", b'{"batch": 0}', "application/json", token=TOKEN)
        unknown_key = post(f"{server.http_url}/v1/rebuild", b'{"now": true}', "application/json", token=TOKEN)
        as_form = post(f"{server.http_url}/v1/rebuild", b"", "application/x-www-form-urlencoded", token=TOKEN)
        assert _current_through(server, TOKEN) == 0  # none of them rebuilt anything

        acme = _rebuild(path, "--token", TOKEN)
        assert acme.exit_code == 0, acme.output
        assert "of tenant acme" in acme.stdout.splitlines()[0]  # no --tenant given: the token's tenant's
        assert "30 trace(s)" in acme.stdout.splitlines()[0]
        assert _current_through(server, GLOBEX) == 0  # globex's are still out of date
        globex = _rebuild(path, "--token", GLOBEX, "--tenant", "globex", "--all")
        assert globex.exit_code == 0, globex.output
        assert globex.stdout.splitlines()[0].startswith("rebuilding every stored trajectory of tenant globex")
        assert "20 trace(s)" in globex.stdout.splitlines()[0]
        assert server.terminate() == 0, server.log()

    assert no_scope.exit_code == 1 and "403" in no_scope.output and "'record'" in no_scope.output, no_scope.output
    assert "may not record graded runs" in no_scope.output and "rebuild the stored trajectories" in no_scope.output
    assert "Nothing was rebuilt" in no_scope.output
    assert wrong_token.exit_code == 1 and "401" in wrong_token.output, wrong_token.output
    assert "pass its token with --token or TRACEGRADE_TOKEN" in wrong_token.output
    assert other_tenant.exit_code == 1 and "403" in other_tenant.output, other_tenant.output
    assert "this token is tenant acme's" in other_tenant.output and "a token of tenant globex" in other_tenant.output
    assert batch_bytes.exit_code == 2, batch_bytes.output
    assert "--mapping-batch-bytes does not apply" in batch_bytes.output and server.http_url in batch_bytes.output
    assert bad_body.status == 400 and "$.batch must be a whole number" in bad_body.json()["error"], bad_body.body
    assert unknown_key.status == 400 and "unknown keys ['now']" in unknown_key.json()["error"], unknown_key.body
    assert as_form.status == 415, as_form.body  # what another site's form could post is refused
    assert _current(path, spans_of) == 50


def _current_through(server: ServerProcess, token: str) -> int:
    """How many of the token's tenant's traces the server holds built by this mapper."""
    sql = f"SELECT count(*) FROM traces WHERE mapper_revision = {MAPPER_REVISION}"
    reply = post(f"{server.http_url}/v1/query", json.dumps({"sql": sql}).encode(), "application/json", token=token)
    assert reply.status == 200, reply.body
    return int(reply.json()["rows"][0][0])


def test_one_rebuild_at_a_time_and_one_whose_client_hangs_up_stops_after_its_step(tmp_path: Path) -> None:
    path = tmp_path / "traces.duckdb"
    spans_of = _outdated_store(path, 1500)
    with _server(path, tmp_path) as server:
        request = urllib.request.Request(
            f"{server.http_url}/v1/rebuild",
            data=b'{"batch": 1}',
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"},
        )
        with urllib.request.urlopen(request, timeout=60) as first:
            start = {"total": 1500, "tenant": "acme", "mapper_revision": MAPPER_REVISION}
            assert json.loads(first.readline()) == {"start": start}
            assert json.loads(first.readline()) == {"step": {"traces": 1, "with_spans": 1, "mapping_batches": 1}}
            second = _rebuild(path, "--token", TOKEN)
        # the first one's client hung up: it stops after its step in progress
        wait_until(lambda: "its client hung up" in server.log(), "the rebuild to notice its client is gone")
        assert second.exit_code == 1, second.output
        assert (
            "409" in second.output and "under way already" in second.output and "Nothing was rebuilt" in second.output
        )
        rest = _rebuild(path, "--token", TOKEN)
        assert rest.exit_code == 0, rest.output
        assert server.terminate() == 0, server.log()
    left = int(rest.stdout.splitlines()[0].split(": ")[-1].split()[0])  # "…: N trace(s), with mapper revision R"
    assert 0 < left < 1500  # the first rebuild kept the steps it made, and stopped before the end
    assert _current(path, spans_of) == 1500


def test_a_rebuild_command_stopped_by_ctrl_c_says_the_server_finishes_its_step_and_the_same_command_goes_on(
    tmp_path: Path,
) -> None:
    path = tmp_path / "traces.duckdb"
    spans_of = _outdated_store(path, 1500)
    with _server(path, tmp_path) as server:
        child = rebuild_process("--store", str(path), "--token", TOKEN, "--batch", "1")
        read_until(child, "rebuilt 1 of 1500 trace(s)")
        child.send_signal(signal.SIGINT)
        rest, errors = child.communicate(timeout=120)
        wait_until(lambda: "its client hung up" in server.log(), "the rebuild to notice its client is gone")
        reported = int(rest.splitlines()[-1].split()[1]) if rest else 1  # the last "rebuilt N of 1500" printed
        # the step the server was on when the client hung up is committed too, never reported: "at least"
        assert reported <= _current_through(server, TOKEN) < 1500
        again = _rebuild(path, "--token", TOKEN)
        assert again.exit_code == 0, again.output
        assert server.terminate() == 0, server.log()
    assert child.returncode == 130, errors
    assert f"interrupted: rebuilt at least {reported} of 1500 trace(s), the server finishing its step" in errors
    assert "run the same command again" in errors and "Traceback" not in errors
    assert _current(path, spans_of) == 1500


@pytest.mark.parametrize("stop", ["SIGTERM", "SIGKILL"])
def test_a_receiver_stopped_mid_rebuild_loses_nothing_and_the_same_command_finishes_it(
    tmp_path: Path, stop: str
) -> None:
    path = tmp_path / "traces.duckdb"
    spans_of = _outdated_store(path, 1500)
    server = _server(path, tmp_path).start()
    load = _exporting(server)
    try:
        wait_until(lambda: load.acked_batches >= 10, "exports acknowledged before the rebuild")
        child = rebuild_process("--store", str(path), "--token", TOKEN, "--batch", "1")
        read_until(child, "rebuilt 1 of 1500 trace(s)")
        if stop == "SIGTERM":
            assert server.terminate() == 0, server.log()
        else:
            server.kill()
        rest, errors = child.communicate(timeout=120)
    finally:
        _stopped(load)
        server.kill()
    assert child.returncode == 1, errors
    said = "the receiver is stopping" if stop == "SIGTERM" else "did not"
    assert said in errors and "run the same command again" in errors, errors
    assert "Traceback" not in errors
    if stop == "SIGTERM":  # the receiver stopped after the step in progress, storing what it acknowledged
        assert "the rebuild stopped after" in server.log() and "the receiver is stopping" in server.log()
        reached = int(rest.splitlines()[-1].split()[1])  # the last "rebuilt N of 1500" printed
        assert _current(path, spans_of) >= reached  # each step it reported was committed before the stop
        assert_stored_once(path, load.acked)
    assert _current(path, spans_of) < 1500

    with _server(path, tmp_path) as restarted:
        again = _rebuild(path, "--token", TOKEN)
        assert again.exit_code == 0, again.output
        assert restarted.terminate() == 0, restarted.log()
    assert _current(path, spans_of) == 1500
    assert_stored_once(path, load.acked)


def test_a_file_held_by_a_process_that_is_no_server_is_refused_naming_no_server(tmp_path: Path) -> None:
    path = tmp_path / "traces.duckdb"
    spans_of = _outdated_store(path, 3)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from tracegrade.store import TraceStore; "
            "s = TraceStore(sys.argv[1]); print('open', flush=True); time.sleep(600)",
            str(path),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "open\n"
        refused = _rebuild(path)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(10)
    assert refused.exit_code == 2, refused.output
    assert "no `tracegrade serve` answers for it" in refused.output and "Nothing was rebuilt" in refused.output
    assert _current(path, spans_of) == 0


def test_a_lake_receiver_leaves_the_rebuild_to_the_command_beside_it(pg_server: PgServer, tmp_path: Path) -> None:
    location = f"ducklake:postgres:{pg_server.new_database()}"
    with LakeServerProcess(location, tmp_path / "lake-data", tmp_path / "one.journal") as server:
        reply = post(f"{server.http_url}/v1/rebuild", b"{}", "application/json")
    assert reply.status == 400, reply.body
    assert "rebuilt beside its receivers" in reply.json()["error"] and "--lake-data" in reply.json()["error"]
