"""``tracegrade rebuild``: map stored traces again with this tracegrade's mapper, by default those an older one built.

A receiver maps a trace when its spans arrive and never again unless more arrive, so a trajectory keeps what the
mapper of its day derived (``traces.mapper_revision``, see ``store.outdated``). The rebuild writes the store: on a
lake it runs beside the receivers; a DuckDB file has one writer, so while `tracegrade serve` holds it the
command is refused, saying to stop the receiver first (as ``maintain --purge-deleted`` is).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.lake_options import checked_lake
from tracegrade.cli.mapping_batch_option import mapping_batch_bytes_option
from tracegrade.cli.store_access import chosen_tenant, lake_data_option, store_option, tenant_option

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend
    from tracegrade.store.outdated import RebuildScope

__all__ = ["MAX_BATCH", "command"]

# a step's trace keys are listed and held at once, and its count is a SQL LIMIT: a bound far above any useful step
MAX_BATCH = 1_000_000


@click.command("rebuild")
@store_option
@lake_data_option
@tenant_option
@click.option(
    "--all", "every", is_flag=True, help="Rebuild every stored trajectory, not only those an older mapper built."
)
@click.option(
    "--batch",
    type=click.IntRange(min=1, max=MAX_BATCH),
    help="Traces rebuilt and committed per step (1 to 1,000,000); progress is printed after each. Default: the "
    "store's build chunk (250 traces on a file, 1,000 on a lake).",
)
@mapping_batch_bytes_option
@friendly_errors
def command(
    store_path: Path | str, lake_data: Path | None, every: bool, batch: int | None, mapping_batch_bytes: int
) -> None:
    """Map stored traces again from their spans with this tracegrade's trajectory mapper: by default every trace
    whose trajectory an older mapper built (it keeps what that mapper derived until it is rebuilt), with --all
    every trace, with --tenant only that tenant's.

    Each step is committed before the next. SIGINT (Ctrl-C) or SIGTERM stops it once the step in progress is
    done; the same command then goes on with the traces still out of date. A lake is rebuilt beside its
    receivers; a store file that `tracegrade serve` holds is refused (stop the receiver first: a file has one
    writer).
    """
    from tracegrade.errors import StoreError
    from tracegrade.ingest.disk_room import says_disk_full
    from tracegrade.store.outdated import RebuildScope, count_to_rebuild, rebuild_steps
    from tracegrade.trajectory import MAPPER_REVISION

    scope = RebuildScope(every=every, tenant=chosen_tenant())
    store = _open(store_path, lake_data)
    done = with_spans = total = mapping_batches = 0
    try:
        with _stop_requests() as stops:
            total = count_to_rebuild(store, scope)
            whose = f" of tenant {scope.tenant}" if scope.tenant is not None else ""
            if not total:
                if scope.tenant is not None and _unknown_tenant(store, scope):
                    click.echo(f"{_no_traces_of(store, scope.tenant)}; nothing to rebuild")
                    return
                which = "stored" if every else "built by an older mapper"
                click.echo(f"no trajectory{whose} is {which}; nothing to rebuild (mapper revision {MAPPER_REVISION})")
                return
            which = "every stored trajectory" if every else "the trajectories built by an older mapper"
            click.echo(f"rebuilding {which}{whose}: {total} trace(s), with mapper revision {MAPPER_REVISION}")
            steps = rebuild_steps(store, scope, step=batch, max_bytes=mapping_batch_bytes)
            while not stops and (step := next(steps, None)) is not None:
                done, with_spans = done + step.traces, with_spans + step.with_spans
                mapping_batches += step.mapping_batches
                click.echo(f"rebuilt {done} of {total} trace(s)")
    except StoreError as exc:
        before = f" (rebuilt {done} of {total} trace(s) before it)" if done else ""
        room = f"{_make_room(store)}, then " if says_disk_full(str(exc)) else ""
        raise click.ClickException(f"{exc}{before}; {room}{_again(every)}") from None
    finally:
        store.close()
    if stops:
        _stopped(stops[0], f"rebuilt {done} of {total} trace(s); {_again(every)}")
    click.echo(f"rebuilt the trajectories of {done} trace(s) with mapper revision {MAPPER_REVISION}")
    click.echo(f"their spans were mapped in {mapping_batches} batch(es) (--mapping-batch-bytes {mapping_batch_bytes})")
    if done > with_spans:
        click.echo(f"{done - with_spans} of them had no spans left to map from: their trajectory rows were deleted")


# tenants listed when --tenant names one without traces: enough to spot the one meant
_TENANTS_SHOWN = 20


def _unknown_tenant(store: StoreBackend, scope: RebuildScope) -> bool:
    """Whether the store holds nothing of ``scope``'s tenant: no trajectory of any revision, and no span waiting to
    be built into one (a mistyped --tenant, most likely, rather than a tenant whose trajectories are current)."""
    from tracegrade.store.outdated import count_to_rebuild

    if count_to_rebuild(store, replace(scope, every=True)):
        return False
    return not store.query("SELECT 1 FROM spans WHERE tenant = ? LIMIT 1", [scope.tenant]).rows


def _no_traces_of(store: StoreBackend, tenant: str) -> str:
    """That ``tenant`` has no traces in the store, and which tenants have trajectories there (the first few)."""
    rows = store.query(f"SELECT DISTINCT tenant FROM traces ORDER BY tenant LIMIT {_TENANTS_SHOWN + 1}").rows
    if not rows:
        return f"tenant {tenant} has no traces in this store, and no tenant has a trajectory stored"
    tenants = [str(row[0]) for row in rows[:_TENANTS_SHOWN]]
    more = ", …" if len(rows) > _TENANTS_SHOWN else ""
    return (
        f"tenant {tenant} has no traces in this store; the tenants with trajectories: {', '.join(tenants)}{more} "
        '(`tracegrade sql "SELECT tenant, count(*) FROM traces GROUP BY tenant"` with the same --store lists them '
        "all): check the name given to --tenant"
    )


def _make_room(store: StoreBackend) -> str:
    """Where to make room after a full disk: a lake's steps write Parquet files under its data path, which may be on
    a disk of its own (the catalog is in PostgreSQL); a file's, next to the file."""
    from tracegrade.store.lake import LakeStore

    if isinstance(store, LakeStore):
        return f"the disk of the lake's data path {store.data_path} is full: make room on it"
    return "make room on the store's disk"


def _again(every: bool) -> str:
    if every:
        return "run it again to rebuild every trace (the ones rebuilt are current already: without --all it skips them)"
    return "run the same command again: it goes on with the traces still out of date"


@contextmanager
def _stop_requests() -> Iterator[list[int]]:
    """The SIGINT and SIGTERM received meanwhile, which stop the rebuild after the step in progress rather than
    inside it (Python's own Ctrl-C lands inside a DuckDB query, which then fails with "Query interrupted");
    the handlers before are put back afterwards. Outside the main thread no handler can be set: nothing is
    caught there."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return

    def ask(signum: int, frame: Any) -> None:
        received.append(signum)

    previous = {signum: signal.signal(signum, ask) for signum in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _stopped(signum: int, progress: str) -> None:
    """End the command as a signal stops every tracegrade command: Ctrl-C exit code 130, SIGTERM 143."""
    if signum == signal.SIGTERM:
        click.echo(f"terminated (SIGTERM): {progress}", err=True)
        raise click.exceptions.Exit(143)
    raise KeyboardInterrupt(f"interrupted: {progress}")


def _open(store_path: Path | str, lake_data: Path | None) -> StoreBackend:
    """The store read-write: a file that exists and no other process holds (a receiver's is refused, saying so), or
    a lake that exists (a mistyped catalog database must not get a new, empty lake)."""
    from tracegrade.errors import StoreLockedError
    from tracegrade.store.access import server_holding
    from tracegrade.store.database import store_not_found
    from tracegrade.store.lake_location import is_lake_location
    from tracegrade.store.trace_store import TraceStore

    if is_lake_location(store_path):
        from tracegrade.store.lake import LakeStore

        data_path = checked_lake(str(store_path), lake_data, "rebuild", "")  # a lake: the last argument is unused
        return LakeStore(str(store_path), data_path=data_path, create=False)
    path = Path(store_path)
    if not path.exists():
        raise store_not_found(path)  # --store's default names a file: a typo must not create one
    try:
        return TraceStore(path)
    except StoreLockedError as exc:
        server = server_holding(path)
        if server is None:
            raise UsageProblem(f"{exc}. A rebuild writes the store: stop that process, then run it again") from None
        raise UsageProblem(
            f"store {path} is held by `tracegrade serve` at {server.url}, and a rebuild writes the store, which has "
            "one writer: stop the receiver (SIGTERM; it stores everything it acknowledged first), run `tracegrade "
            f"rebuild --store {path}`, then start the receiver again. Nothing was rebuilt"
        ) from None
