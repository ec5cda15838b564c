"""``tracegrade serve``: run the OTLP receiver (gRPC + HTTP) writing spans into a DuckDB store."""

from __future__ import annotations

import os
from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.ingest.settings import ENV_VARS, ServeSettings, misspelled_env_vars

__all__ = ["command"]


def _announce(server: object) -> None:
    from tracegrade.ingest.server import ReceiverServer

    assert isinstance(server, ReceiverServer)
    settings = server.settings
    click.echo(f"tracegrade serve: writing spans to {settings.store}")
    click.echo(f"  OTLP/gRPC  {server.grpc_target}")
    click.echo(f"  OTLP/HTTP  {server.http_url}/v1/traces  (and /v1/logs)")
    click.echo(f"  health     {server.http_url}/healthz  /readyz  /metrics")
    if settings.token:
        click.echo("  a bearer token is required on every request")
    if settings.host in ("0.0.0.0", "::"):
        click.echo("  (a wildcard address: gRPC listens on IPv4 and IPv6 alike, HTTP on the family given)")
    click.echo("Stop with Ctrl-C or SIGTERM (pending spans are flushed first).", err=False)


@click.command("serve")
@click.option(
    "--store",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=ENV_VARS["store"],
    required=True,
    help="DuckDB file to write spans to (created if missing).",
)
@click.option("--host", envvar=ENV_VARS["host"], help="Address to bind (default 127.0.0.1).")
@click.option("--grpc-port", type=int, envvar=ENV_VARS["grpc_port"], help="OTLP/gRPC port (default 4317; 0 = any).")
@click.option("--http-port", type=int, envvar=ENV_VARS["http_port"], help="OTLP/HTTP port (default 4318; 0 = any).")
@click.option("--token", envvar=ENV_VARS["token"], help="Bearer token required on every request (both protocols).")
@click.option(
    "--tls-cert",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=ENV_VARS["tls_cert"],
    help="PEM certificate chain; enables TLS on both protocols (with --tls-key).",
)
@click.option(
    "--tls-key",
    type=click.Path(dir_okay=False, path_type=Path),
    envvar=ENV_VARS["tls_key"],
    help="PEM private key for --tls-cert.",
)
@click.option(
    "--max-request-bytes",
    envvar=ENV_VARS["max_request_bytes"],
    help="Largest request, compressed and decompressed (default 16MiB; units k/M/G accepted).",
)
@click.option(
    "--queue-spans",
    type=int,
    envvar=ENV_VARS["queue_spans"],
    help="Write-queue capacity in spans; requests wait for room, then are told to retry (default 10000).",
)
@click.option(
    "--queue-wait",
    type=float,
    envvar=ENV_VARS["queue_wait"],
    help="Seconds a request waits, undecoded, for room in a full write queue before it is told to retry (default 1).",
)
@click.option(
    "--store-memory-limit",
    envvar=ENV_VARS["store_memory_limit"],
    help="DuckDB memory limit for the store's cache (default 96MB, at least 64MB).",
)
@click.option(
    "--max-inflight-requests",
    type=int,
    envvar=ENV_VARS["max_inflight_requests"],
    help="Export requests handled at once; more are told to retry (default 32).",
)
@click.option(
    "--shutdown-timeout",
    type=float,
    envvar=ENV_VARS["shutdown_timeout"],
    help="Seconds to let in-flight requests finish when stopping, then again for pending trajectory rebuilds "
    "(the rest are rebuilt at the next start; default 30).",
)
@click.option(
    "--worker-rules",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    envvar=ENV_VARS["worker_rules"],
    help="Run one online grading worker in-process with this rules.yaml (see `tracegrade worker`).",
)
@click.option(
    "--mapping-process/--no-mapping-process",
    default=None,
    envvar=ENV_VARS["mapping_process"],
    help="Map large trajectory backlogs in a child process, off the receiver's interpreter lock, at about "
    "100 MB more memory (default: off, everything is mapped in the receiver's process).",
)
@click.option(
    "--query-timeout",
    type=float,
    envvar=ENV_VARS["query_timeout"],
    help="Seconds a query (POST /v1/query) may run before it is cancelled (default 30).",
)
@click.option(
    "--max-queries",
    type=int,
    envvar=ENV_VARS["max_queries"],
    help="Queries run at once; more wait for a turn, up to --query-timeout (default 2).",
)
@click.option(
    "--query-memory-limit",
    envvar=ENV_VARS["query_memory_limit"],
    help="DuckDB memory queries may use on top of --store-memory-limit; beyond it they spill to disk (default 256MB).",
)
@click.option(
    "--require-auth/--no-require-auth",
    default=None,
    envvar=ENV_VARS["require_auth"],
    help="Refuse to start without --token, or without TLS when --host is not a loopback address.",
)
@friendly_errors
def command(**options: object) -> None:
    """Receive OTLP traces and logs (gRPC and HTTP) and store them in a DuckDB file.

    Every flag can also be set with an environment variable: TRACEGRADE_STORE, TRACEGRADE_HOST,
    TRACEGRADE_GRPC_PORT, TRACEGRADE_HTTP_PORT, TRACEGRADE_TOKEN, TRACEGRADE_TLS_CERT, TRACEGRADE_TLS_KEY,
    TRACEGRADE_MAX_REQUEST_BYTES, TRACEGRADE_QUEUE_SPANS, TRACEGRADE_QUEUE_WAIT, TRACEGRADE_STORE_MEMORY_LIMIT,
    TRACEGRADE_MAX_INFLIGHT_REQUESTS, TRACEGRADE_SHUTDOWN_TIMEOUT, TRACEGRADE_WORKER_RULES,
    TRACEGRADE_MAPPING_PROCESS, TRACEGRADE_QUERY_TIMEOUT, TRACEGRADE_MAX_QUERIES,
    TRACEGRADE_QUERY_MEMORY_LIMIT, TRACEGRADE_REQUIRE_AUTH.
    """
    typos = misspelled_env_vars(os.environ)
    if typos:
        raise UsageProblem("; ".join(typos))
    settings = ServeSettings.build(options, source="(tracegrade serve options and TRACEGRADE_* variables)")
    exposures = settings.exposures()
    if exposures and settings.require_auth:
        raise UsageProblem("refusing to start (--require-auth): " + "; ".join(exposures))
    for exposure in exposures:
        click.echo(f"warning: {exposure}", err=True)
    from tracegrade.ingest.server import run_server

    try:
        run_server(settings, announce=_announce)
    except OSError as exc:
        raise UsageProblem(str(exc)) from None
