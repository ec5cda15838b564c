"""``tracegrade forget``: delete traces on request (a user's conversation, under privacy law), for good.

On a lake, or a DuckDB file no server holds, it opens the store and forgets the traces there; on a file that
`tracegrade serve` holds, it asks that server (``POST /v1/forget``, whose token decides the tenant).
"""

from __future__ import annotations

from pathlib import Path

import click

from tracegrade.cli.common import friendly_errors
from tracegrade.cli.store_access import chosen_tenant, lake_data_option, open_writable_store, store_options

__all__ = ["command"]


@click.command("forget")
@store_options
@lake_data_option
@click.argument("trace_ids", nargs=-1)
@click.option(
    "--ids-from",
    type=click.File("r", encoding="utf-8"),
    help="Also read trace ids from this file, one per line ('-': standard input).",
)
@friendly_errors
def command(
    store_path: Path | str, token: str | None, lake_data: Path | None, trace_ids: tuple[str, ...], ids_from: object
) -> None:
    """Delete every record of the traces TRACE_IDS (spans, log records, evaluation events, trajectories,
    grading jobs, an online worker's cases of them) and keep them forgotten: spans of theirs that arrive later
    are dropped.

    The traces are --tenant's ('default' without it); through a server, its token's. Runs people record
    (grade, CI, live) keep their own copy of what they graded: delete such a run yourself if it must go.
    """
    from tracegrade.errors import StoreError, StoreLockedError
    from tracegrade.store.access import server_holding
    from tracegrade.store.database import store_not_found
    from tracegrade.store.lake_location import is_lake_location
    from tracegrade.store.tenancy import DEFAULT_TENANT
    from tracegrade.store.trace_deletion import checked_trace_ids

    listed = list(trace_ids) + ([line.strip() for line in ids_from if line.strip()] if ids_from else [])  # type: ignore[attr-defined]
    try:
        ids = checked_trace_ids(listed, "the trace ids")
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    if not is_lake_location(store_path) and not Path(store_path).exists():
        raise store_not_found(Path(store_path))
    try:
        store = open_writable_store(store_path, lake_data, "forgetting traces")
    except StoreLockedError:
        remote = server_holding(store_path, token)
        if remote is None:
            raise
        if chosen_tenant() is not None:
            raise click.UsageError("--tenant does not apply through a server: its token decides the tenant") from None
        click.echo(remote.forget(ids).summary("forgot"))
        return
    try:
        click.echo(store.forget(ids, chosen_tenant() or DEFAULT_TENANT).summary("forgot"))
    except StoreError as exc:
        raise click.ClickException(f"{exc} (run it again: forgetting twice does no harm)") from None
    finally:
        store.close()
