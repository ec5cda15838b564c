"""``tracegrade ui``: the web UI on a store file (or a lake) opened read-only, without a receiver."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.store_access import as_tenant, store_option, tenant_option
from tracegrade.ingest.settings import ServeSettings
from tracegrade.store.lake_location import is_lake_location, redacted

if TYPE_CHECKING:
    from tracegrade.store import TraceStore

__all__ = ["command"]


@click.command("ui")
@store_option
@tenant_option
@click.option(
    "--host", default=ServeSettings.model_fields["host"].default, show_default=True, help="Address to listen on."
)
@click.option("--port", default=8321, show_default=True, type=click.IntRange(0, 65535), help="HTTP port.")
@friendly_errors
def command(store_path: Path | str, host: str, port: int) -> None:
    """Browse a store in the browser: traces, trajectories, grading runs, diffs and SQL (read-only).

    The file is opened read-only, so no `tracegrade serve` can open it while this runs; while a server
    holds the file, use its own UI at http://<server>/ui/ instead. A lake is read while receivers write.
    """
    from aiohttp import web

    from tracegrade.ingest.host_guard import host_guard, is_loopback
    from tracegrade.ui import add_ui_routes
    from tracegrade.ui.app import MAX_REQUEST_LINE, redirect_to_ui

    store = _open(store_path)
    if not is_loopback(host):
        click.echo(
            f"warning: serving {redacted(store_path)} on {host} without a token: anyone who can reach it can read it",
            err=True,
        )
    guard = host_guard(host)
    app = web.Application(middlewares=[guard] if guard is not None else [])
    reader = as_tenant(store)
    add_ui_routes(app, lambda _: reader, None)
    app.router.add_get("/", redirect_to_ui)
    try:
        web.run_app(
            app,
            host=host,
            port=port,
            print=lambda _: click.echo(f"tracegrade UI on http://{host}:{port}/ui/"),
            max_line_size=MAX_REQUEST_LINE,  # the UI's long addresses (see MAX_REQUEST_LINE)
        )
    finally:
        store.close()


def _open(store_path: Path | str) -> TraceStore:
    """The store opened read-only: a lake, or the file (refused while another process holds it)."""
    from tracegrade.errors import StoreLockedError
    from tracegrade.store import TraceStore
    from tracegrade.store.access import read_sidecar

    if is_lake_location(store_path):
        from tracegrade.store.lake import LakeStore

        return LakeStore(str(store_path), read_only=True)
    if not Path(store_path).exists():
        raise UsageProblem(f"store not found: {store_path} (fill one with `tracegrade serve` or `tracegrade import`)")
    try:
        return TraceStore(store_path, read_only=True)
    except StoreLockedError as exc:
        server = read_sidecar(store_path)
        where = f"open {server.http_url}/ui/ instead" if server else "stop the process that holds it"
        raise UsageProblem(f"{exc}; {where}") from None
