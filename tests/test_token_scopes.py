"""Token scopes through a real ``tracegrade serve --tokens``: an exporter's token (``ingest``) sends spans over
both protocols with the real OTLP exporters and can do nothing else; a reader's token (``read``) reads and
cannot send, record or delete; ``forget`` and ``record`` are needed for deleting and recording; a plain token
may do everything. Each refusal is 403 (gRPC PERMISSION_DENIED) saying which scope is missing, and accepted
data stays. A SIGHUP that narrows a token's scopes takes effect at once, for the UI's cookie too."""

from __future__ import annotations

import http.client
import json
import os
import signal
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter

from tests.support.server_otlp import HttpReply, post
from tests.support.server_process import ServerProcess
from tests.support.server_requests import exchange, span_json, traces_proto, ui_sign_in, unique_trace_id
from tests.support.tenant_traffic import export_one_span, sql, stored_trace_ids
from tests.support.waiting import wait_until
from tracegrade.cli.main import cli
from tracegrade.ui.auth import COOKIE

EXPORTER, READER, JANITOR, ADMIN = (
    "exporter-token-0001",
    "reader-token-00002",
    "janitor-token-0003",
    "admin-token-000004",
)
TRACE_EXPORT = "/opentelemetry.proto.collector.trace.v1.TraceService/Export"


def _tokens_file(path: Path, exporter_scopes: list[str]) -> Path:
    entries = [
        {"token": EXPORTER, "scopes": exporter_scopes},
        {"token": READER, "scopes": ["read"]},
        {"token": JANITOR, "scopes": ["read", "forget"]},
        ADMIN,
    ]
    path.write_text(json.dumps({"tenants": {"acme": entries}}), encoding="utf-8")  # JSON is YAML
    return path


def _refused(reply: HttpReply, scope: str) -> None:
    assert reply.status == 403, reply.body
    body = reply.json()
    assert f"whose scopes include '{scope}'" in body.get("message", body.get("error", "")), body


def _json_post(server: ServerProcess, path: str, body: object, token: str) -> HttpReply:
    return post(f"{server.http_url}{path}", json.dumps(body).encode(), "application/json", token=token)


def _grpc_status(server: ServerProcess, token: str) -> grpc.StatusCode:
    body = traces_proto([span_json(unique_trace_id(), 0)])
    with grpc.insecure_channel(server.grpc_target) as channel:
        try:
            channel.unary_unary(TRACE_EXPORT)(body, metadata=(("authorization", f"Bearer {token}"),), timeout=30)
        except grpc.RpcError as error:
            return error.code()  # type: ignore[no-any-return]
    return grpc.StatusCode.OK


def test_each_token_does_what_its_scopes_allow_and_nothing_else(tmp_path: Path) -> None:
    tokens = _tokens_file(tmp_path / "tokens.yaml", ["ingest"])
    with ServerProcess(tmp_path / "store.duckdb", extra_args=("--tokens", str(tokens))) as server:
        url = server.http_url
        # the exporter's token sends over both protocols, through the real exporters
        by_grpc = export_one_span(
            GrpcSpanExporter(
                endpoint=server.grpc_target, insecure=True, headers=(("authorization", f"Bearer {EXPORTER}"),)
            ),
            "scoped",
            "over-grpc",
        )
        by_http = export_one_span(
            HttpSpanExporter(endpoint=f"{url}/v1/traces", headers={"Authorization": f"Bearer {EXPORTER}"}),
            "scoped",
            "over-http",
        )
        wait_until(lambda: {by_grpc, by_http} <= stored_trace_ids(server.http_url, ADMIN), "the exporter's spans", 30)
        # ... and may do nothing else: read, sign in to the UI, use MCP, record a run, forget
        _refused(sql(url, "SELECT count(*) FROM spans", EXPORTER), "read")
        status, cookie, page = ui_sign_in(server.http_url, EXPORTER)
        assert status == 403 and not cookie and b"may not read the store" in page
        status, _, answer = exchange(f"{url}/ui/api/traces", Authorization=f"Bearer {EXPORTER}")
        assert status == 403 and b"whose scopes include 'read'" in answer
        status, _, answer = exchange(f"{url}/mcp", "POST", b"{}", Authorization=f"Bearer {EXPORTER}")
        assert status == 403 and b"whose scopes include 'read'" in answer
        _refused(_json_post(server, "/v1/runs", {"report": {}}, EXPORTER), "record")
        _refused(_json_post(server, "/v1/forget", {"trace_ids": [by_grpc]}, EXPORTER), "forget")
        answer = CliRunner().invoke(cli, ["sql", "--store", str(server.store), "--token", EXPORTER, "SELECT 1"])
        assert answer.exit_code != 0 and "answered 403: this token may not read the store" in answer.output

        # the reader's token reads, and cannot send (either protocol), record or forget
        assert sql(url, "SELECT count(*) FROM spans", READER).json()["rows"] == [[2]]
        status, cookie, _ = ui_sign_in(server.http_url, READER)
        assert status == 303 and cookie
        refused = post(f"{url}/v1/traces", traces_proto([span_json(unique_trace_id(), 0)]), token=READER)
        assert refused.status == 403
        assert _grpc_status(server, READER) is grpc.StatusCode.PERMISSION_DENIED
        _refused(_json_post(server, "/v1/runs", {"report": {}}, READER), "record")
        _refused(_json_post(server, "/v1/forget", {"trace_ids": [by_grpc]}, READER), "forget")
        assert stored_trace_ids(server.http_url, ADMIN) == {by_grpc, by_http}  # every refusal deleted nothing

        # forget needs its scope; a plain token may do everything
        reply = _json_post(server, "/v1/forget", {"trace_ids": [by_grpc]}, JANITOR)
        assert reply.status == 200, reply.body
        wait_until(lambda: stored_trace_ids(server.http_url, ADMIN) == {by_http}, "the forgotten trace gone", 30)
        assert _grpc_status(server, ADMIN) is grpc.StatusCode.OK
        reply = _json_post(server, "/v1/runs", {"report": {}}, ADMIN)
        assert reply.status == 400 and "not a valid EvalReport" in reply.json()["error"]  # past the scope check


def test_a_reload_that_narrows_a_tokens_scopes_takes_effect_at_once_for_its_ui_cookie_too(tmp_path: Path) -> None:
    tokens = _tokens_file(tmp_path / "tokens.yaml", ["ingest", "read"])
    with ServerProcess(tmp_path / "store.duckdb", extra_args=("--tokens", str(tokens))) as server:
        status, cookie, _ = ui_sign_in(server.http_url, EXPORTER)
        assert status == 303 and cookie
        assert exchange(f"{server.http_url}/ui/api/traces", Cookie=f"{COOKIE}={cookie}")[0] == 200
        _tokens_file(tokens, ["ingest"])
        os.kill(server.pid, signal.SIGHUP)
        wait_until(lambda: sql(server.http_url, "SELECT 1", EXPORTER).status == 403, "the narrowed scopes", 30)
        assert "tokens     tenants acme; 4 tokens, 3 of them limited to some scopes (from" in server.log()
        assert f"reloaded {tokens}: tenants acme; 4 tokens, 3 of them limited to some scopes" in server.log()
        status, _, answer = exchange(f"{server.http_url}/ui/api/traces", Cookie=f"{COOKIE}={cookie}")
        assert status == 403 and b"may not read the store" in answer
        assert (
            post(f"{server.http_url}/v1/traces", traces_proto([span_json(unique_trace_id(), 0)]), token=EXPORTER).status
            == 200
        )
        # a file with an unknown scope is refused at reload, and the scopes in force stay
        tokens.write_text(
            json.dumps({"tenants": {"acme": [{"token": EXPORTER, "scopes": ["admin"]}]}}), encoding="utf-8"
        )
        os.kill(server.pid, signal.SIGHUP)
        wait_until(lambda: "unknown scope 'admin'" in server.log(), "the refused reload", 30)
        assert sql(server.http_url, "SELECT 1", READER).status == 200


def _with_two_authorizations(server: ServerProcess, path: str, body: bytes, content_type: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", int(server.http_url.rsplit(":", 1)[1]), timeout=30)
    try:
        connection.putrequest("POST", path)
        connection.putheader("Content-Type", content_type)
        connection.putheader("Content-Length", str(len(body)))
        connection.putheader("Authorization", f"Bearer {ADMIN}")
        connection.putheader("Authorization", f"Bearer {READER}")
        connection.endheaders(body)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def test_a_request_with_two_authorizations_is_refused_whichever_comes_first(tmp_path: Path) -> None:
    tokens = _tokens_file(tmp_path / "tokens.yaml", ["ingest"])
    with ServerProcess(tmp_path / "store.duckdb", extra_args=("--tokens", str(tokens))) as server:
        trace_id = unique_trace_id()
        status, answer = _with_two_authorizations(
            server, "/v1/traces", traces_proto([span_json(trace_id, 0)]), "application/x-protobuf"
        )
        assert status == 401 and b"several Authorization headers; send one" in answer
        query = json.dumps({"sql": "SELECT count(*) FROM spans"}).encode()
        assert _with_two_authorizations(server, "/v1/query", query, "application/json")[0] == 401
        with grpc.insecure_channel(server.grpc_target) as channel:
            export = channel.unary_unary(TRACE_EXPORT)
            metadata = (("authorization", f"Bearer {ADMIN}"), ("authorization", f"Bearer {READER}"))
            with pytest.raises(grpc.RpcError) as refused:
                export(traces_proto([span_json(trace_id, 1)]), metadata=metadata, timeout=30)
        assert refused.value.code() is grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        assert "several authorization metadata entries" in refused.value.details()  # type: ignore[attr-defined]
        assert _grpc_status(server, ADMIN) is grpc.StatusCode.OK  # one token still works
        assert trace_id not in stored_trace_ids(server.http_url, ADMIN)
