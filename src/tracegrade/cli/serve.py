"""``tracegrade serve``: run the OTLP receiver (gRPC + HTTP) writing spans into a DuckDB store."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from tracegrade.cli.common import UsageProblem, friendly_errors, log_to_stderr
from tracegrade.cli.store_location import STORE_LOCATION
from tracegrade.ingest.settings import ENV_VARS, ServeSettings

__all__ = ["command"]


def _announce(server: object) -> None:
    from tracegrade.ingest.server import ReceiverServer

    assert isinstance(server, ReceiverServer)
    settings = server.settings
    from tracegrade.store.lake_location import redacted

    click.echo(f"tracegrade serve: writing spans to {redacted(settings.store)}")
    click.echo(f"  OTLP/gRPC  {server.grpc_target}")
    click.echo(f"  OTLP/HTTP  {server.http_url}/v1/traces  (and /v1/logs)")
    if server.metrics_listener is None:
        click.echo(f"  health     {server.http_url}/healthz  /readyz  /metrics")
    else:
        click.echo(f"  health     {server.http_url}/healthz  /readyz")
        click.echo(f"  metrics    {server.metrics_listener.url}")
    if settings.tokens is not None:
        click.echo(f"  tokens     {server.token_table.describe()} (from {settings.tokens}; reloaded on SIGHUP)")
    elif settings.token:
        click.echo("  a bearer token is required on every request")
    policy = settings.retention()
    if policy is not None and policy.shortest is not None:
        from tracegrade.ingest.retention_keeper import pass_interval

        every = pass_interval(policy.shortest)
        click.echo(f"  retention  {policy.describe()} (looked for every {every})")
    if settings.host in ("0.0.0.0", "::"):
        click.echo("  (a wildcard address: gRPC listens on IPv4 and IPv6 alike, HTTP on the family given)")
    click.echo("Stop with Ctrl-C or SIGTERM (pending spans are flushed first).", err=False)


# click types where a setting's annotation is not enough (sizes take units; paths must be files)
_CLICK_TYPES: dict[str, Any] = {
    "store": STORE_LOCATION,  # a file, or a lake location kept as given
    "lake_data": click.Path(file_okay=False, path_type=Path),
    "journal": click.Path(file_okay=False, path_type=Path),
    "max_request_bytes": str,
    "query_max_bytes": str,
    "mapping_batch_bytes": str,
    "tls_cert": click.Path(dir_okay=False, path_type=Path),
    "tls_key": click.Path(dir_okay=False, path_type=Path),
    "worker_rules": click.Path(exists=True, dir_okay=False, path_type=Path),
    "tokens": click.Path(exists=True, dir_okay=False, path_type=Path),
    "max_inflight_per_tenant": click.IntRange(min=1),
}


def _setting_options(command: Callable[..., None]) -> Callable[..., None]:
    """One click option per ServeSettings field: its flag, environment variable, help and default come from
    the field, so the CLI never restates them."""
    for name, field in reversed(ServeSettings.model_fields.items()):
        flag = f"--{name.replace('_', '-')}"
        described = (field.description or "").rstrip(".")
        text = described[:1].upper() + described[1:]
        if field.is_required():
            help_text = f"{text}."
        elif field.default is None:
            help_text = f"{text} (default: none)."
        else:
            help_text = f"{text} (default: {field.default})."
        if field.annotation is bool:
            option = click.option(
                f"{flag}/--no-{name.replace('_', '-')}",
                default=None,
                envvar=ENV_VARS[name],
                show_envvar=True,
                help=help_text,
            )
        else:
            kind = _CLICK_TYPES.get(name, field.annotation if field.annotation in (int, float) else str)
            option = click.option(
                flag, type=kind, envvar=ENV_VARS[name], show_envvar=True, required=field.is_required(), help=help_text
            )
        command = option(command)
    return command


def _check_host(host: str) -> None:
    """A --host name that does not resolve is refused as such: gRPC would only say it cannot listen there."""
    try:
        socket.getaddrinfo(host.strip("[]"), None)  # an IPv6 address may come bracketed
    except socket.gaierror as exc:
        raise UsageProblem(
            f"--host {host!r} does not resolve to an address ({exc.strerror}); give an IP address of this machine "
            "(127.0.0.1, 0.0.0.0) or a name that resolves to one"
        ) from None


@click.command("serve")
@_setting_options
@friendly_errors
def command(**options: object) -> None:
    """Receive OTLP traces and logs (gRPC and HTTP) and store them in a DuckDB file.

    Every flag can also be set with the environment variable shown beside it; a misspelt TRACEGRADE_*
    variable is refused with a suggestion (by every tracegrade command).
    """
    settings = ServeSettings.build(options, source="(tracegrade serve options and TRACEGRADE_* variables)")
    _check_host(settings.host)
    if settings.worker_rules is not None:  # refused before the store (and its journal) is created
        from tracegrade.evaluation.worker import WorkerRules

        WorkerRules.from_file(settings.worker_rules)
    exposures = settings.exposures()
    if exposures and settings.require_auth:
        raise UsageProblem("refusing to start (--require-auth): " + "; ".join(exposures))
    for exposure in exposures:
        click.echo(f"warning: {exposure}", err=True)
    from tracegrade.ingest.server import run_server

    log_to_stderr()
    try:
        run_server(settings, announce=_announce)
    except OSError as exc:
        raise UsageProblem(str(exc)) from None
