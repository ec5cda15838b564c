"""An OTLP export of a tenant holds that tenant's spans and log records and nothing of another's: through a real
`tracegrade serve --tokens` (the token decides the tenant) and from the file with --tenant; imported into another
store, each record is the one the tenant sent. Exporting several tenants at once says that OTLP carries no tenant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb
import pytest

from tests.support.grading_cli import run_cli
from tests.support.otlp_export_traffic import Sent, send_rich_traffic
from tests.support.server_process import ServerProcess
from tests.support.tenant_traffic import write_tokens

ACME, GLOBEX = "acme-export-token", "globex-export-token"
# every stored column but the tenant (the importing store files them under its own) and received_at
COLUMNS = {
    "spans": "trace_id, span_id, parent_span_id, name, kind, service_name, scope_name, scope_version, start_ns, "
    "end_ns, status_code, status_message, attributes, events, links, resource, trace_state, flags, "
    "dropped_attributes_count, dropped_events_count, dropped_links_count",
    "logs": "log_key, trace_id, span_id, time_ns, observed_time_ns, event_name, severity_number, severity_text, "
    "body, attributes, resource, scope_name, flags, dropped_attributes_count",
}


@pytest.fixture(scope="module")
def two_tenants(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Sent], Path]:
    """A store holding acme's and globex's traffic (sent with their tokens), and the exports made through its
    running server with acme's token (in the returned directory)."""
    workdir = tmp_path_factory.mktemp("export-otlp-tenants")
    tokens = write_tokens(workdir / "tokens.yaml", {"acme": [ACME], "globex": [GLOBEX]})
    store = workdir / "store.duckdb"
    server = ServerProcess(store, extra_args=("--tokens", str(tokens))).start()
    try:
        sent = {
            "acme": send_rich_traffic(server.http_url, server.grpc_target, token=ACME, marker="-acme"),
            "globex": send_rich_traffic(server.http_url, server.grpc_target, token=GLOBEX, marker="-globex"),
        }
        for fmt in ("otlp", "otlp-json"):
            exported = run_cli("export", "--store", store, "--token", ACME, "--format", fmt, "-o", workdir / fmt)
            assert exported.exit_code == 0, exported.output
            assert "several tenants" not in exported.stderr
        # the server answers as the token's tenant: --tenant naming another would mislabel the file, so it is refused
        refused = run_cli(
            "export", "--store", store, "--token", ACME, "--tenant", "globex", "--format", "otlp", "-o", workdir / "x"
        )
        assert refused.exit_code == 2 and "--tenant globex does not apply through a server" in refused.stderr
        assert not (workdir / "x").exists()
    finally:
        assert server.terminate() == 0, server.log()
    return store, sent, workdir


def _rows(store: Path, table: str, tenant: str | None = None) -> list[tuple[Any, ...]]:
    where = "" if tenant is None else " WHERE tenant = ?"
    with duckdb.connect(str(store), read_only=True) as con:
        return con.execute(
            f"SELECT {COLUMNS[table]} FROM {table}{where} ORDER BY ALL", [tenant] if tenant else []
        ).fetchall()


def _imported(export: Path, store: Path) -> Path:
    imported = run_cli("import", "--store", store, export)
    assert imported.exit_code == 0, imported.output
    return store


@pytest.mark.parametrize("fmt", ["otlp", "otlp-json"])
def test_an_export_through_the_server_holds_its_tokens_tenant_only(
    two_tenants: tuple[Path, dict[str, Sent], Path], tmp_path: Path, fmt: str
) -> None:
    store, sent, workdir = two_tenants
    copy = _imported(workdir / fmt, tmp_path / "b.duckdb")
    for table in ("spans", "logs"):
        assert _rows(copy, table) == _rows(store, table, "acme")
    assert len(_rows(copy, "spans")) == sent["acme"].spans and len(_rows(copy, "logs")) == sent["acme"].logs
    assert b"globex" not in (workdir / fmt).read_bytes().lower()


def test_an_export_of_the_file_with_tenant_holds_that_tenants_records_only(
    two_tenants: tuple[Path, dict[str, Sent], Path], tmp_path: Path
) -> None:
    store, sent, _ = two_tenants
    output = tmp_path / "globex.otlp.gz"
    exported = run_cli("export", "--store", store, "--tenant", "globex", "--format", "otlp", "-o", output)
    assert exported.exit_code == 0, exported.output
    assert "several tenants" not in exported.stderr
    copy = _imported(output, tmp_path / "b.duckdb")
    for table in ("spans", "logs"):
        assert _rows(copy, table) == _rows(store, table, "globex")
    assert len(_rows(copy, "spans")) == sent["globex"].spans


def test_an_export_of_every_tenant_warns_that_otlp_carries_no_tenant(
    two_tenants: tuple[Path, dict[str, Sent], Path], tmp_path: Path
) -> None:
    store, sent, _ = two_tenants
    exported = run_cli("export", "--store", store, "--format", "otlp-json", "-o", tmp_path / "all.jsonl")
    assert exported.exit_code == 0, exported.output
    assert "several tenants (acme, globex)" in exported.stderr and "Export each with --tenant" in exported.stderr
    assert f"{sent['acme'].spans + sent['globex'].spans} spans" in exported.stdout
