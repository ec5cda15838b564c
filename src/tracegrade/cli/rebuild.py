"""``tracegrade rebuild``: map stored traces again with this tracegrade's mapper, by default those an older one built.

A receiver maps a trace when its spans arrive and never again unless more arrive, so a trajectory keeps what the
mapper of its day derived (``traces.mapper_revision``, see ``store.outdated``). The rebuild writes the store: on a
lake it runs beside the receivers; a DuckDB file has one writer, so while `tracegrade serve` holds it the command
asks that server to rebuild (``POST /v1/rebuild``, with ``--token``), which does so beside its ingest and streams
its progress back, printed as a rebuild here prints it (``store.rebuild_progress``).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Generator, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.lake_options import checked_lake
from tracegrade.cli.mapping_batch_option import mapping_batch_bytes_given, mapping_batch_bytes_option
from tracegrade.cli.store_access import chosen_tenant, lake_data_option, store_option, tenant_option, token_option
from tracegrade.store.rebuild_progress import MAX_BATCH

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend
    from tracegrade.store.outdated import RebuildScope, RebuiltStep
    from tracegrade.store.rebuild_progress import RebuildDone, RebuildStart
    from tracegrade.store.remote import RemoteStore

__all__ = ["MAX_BATCH", "command"]

# longest wait for the server's next line (a step): a step waits for a purge of the file under way, which takes hours
STEP_ANSWER_SECONDS = 6 * 3600.0


@click.command("rebuild")
@store_option
@lake_data_option
@tenant_option
@token_option
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
    store_path: Path | str,
    lake_data: Path | None,
    token: str | None,
    every: bool,
    batch: int | None,
    mapping_batch_bytes: int,
) -> None:
    """Map stored traces again from their spans with this tracegrade's trajectory mapper: by default every trace
    whose trajectory an older mapper built (it keeps what that mapper derived until it is rebuilt), with --all
    every trace, with --tenant only that tenant's.

    Each step is committed before the next. SIGINT (Ctrl-C) or SIGTERM stops it once the step in progress is
    done; the same command then goes on with the traces still out of date. A lake is rebuilt beside its
    receivers; a store file that `tracegrade serve` holds is rebuilt by that server (--token: one whose scopes
    include 'record'; a tenant's token rebuilds that tenant's traces only), which goes on taking exports
    meanwhile.
    """
    from tracegrade.errors import StoreError
    from tracegrade.ingest.disk_room import says_disk_full
    from tracegrade.store.outdated import RebuildScope

    scope = RebuildScope(every=every, tenant=chosen_tenant())
    store, server = _open(store_path, lake_data, token)
    if server is not None:
        progress = server.rebuild(scope, batch)
    else:
        assert store is not None  # _open gives one of the two
        progress = _rebuilt_here(store, scope, batch, mapping_batch_bytes)
    start: RebuildStart | None = None
    done = with_spans = mapping_batches = 0
    try:
        with _stop_requests() as stops:
            start = _started(next(progress))
            if start.nothing is not None:
                click.echo(start.nothing)
                return
            which = "every stored trajectory" if every else "the trajectories built by an older mapper"
            whose = f" of tenant {start.tenant}" if start.tenant is not None else ""  # through a server: the token's
            by = f" by the server at {server.url}" if server else ""
            click.echo(
                f"rebuilding {which}{whose}{by}: {start.total} trace(s), with mapper revision {start.mapper_revision}"
            )
            while not stops and (step := _next_step(progress)) is not None:
                done, with_spans = done + step.traces, with_spans + step.with_spans
                mapping_batches += step.mapping_batches
                click.echo(f"rebuilt {done} of {start.total} trace(s)")
    except StoreError as exc:
        if start is None:  # refused before it began (no server's answer, a token without the scope, one under way)
            raise click.ClickException(f"{exc}. Nothing was rebuilt") from None
        before = f" (rebuilt {done} of {start.total} trace(s) before it)" if done else ""
        room = f"{_make_room(store)}, then " if says_disk_full(str(exc)) else ""
        raise click.ClickException(f"{exc}{before}; {room}{_again(every)}") from None
    finally:
        progress.close()  # through a server: hangs up, which ends its rebuild after the step in progress
        if store is not None:
            store.close()
    if stops:
        # a server notices the hang-up between steps: the one it was on is committed, though never reported here
        rebuilt = (
            f"rebuilt at least {done} of {start.total} trace(s), the server finishing its step"
            if server
            else f"rebuilt {done} of {start.total} trace(s)"
        )
        _stopped(stops[0], f"{rebuilt}; {_again(every)}")
    click.echo(f"rebuilt the trajectories of {done} trace(s) with mapper revision {start.mapper_revision}")
    mapped_by = "the server's --mapping-batch-bytes" if server else f"--mapping-batch-bytes {mapping_batch_bytes}"
    click.echo(f"their spans were mapped in {mapping_batches} batch(es) ({mapped_by})")
    if done > with_spans:
        click.echo(f"{done - with_spans} of them had no spans left to map from: their trajectory rows were deleted")


Progress = Generator["RebuildStart | RebuiltStep | RebuildDone", None, None]


def _rebuilt_here(store: StoreBackend, scope: RebuildScope, batch: int | None, mapping_batch_bytes: int) -> Progress:
    """The rebuild's progress, each step rebuilt and committed in this process as it is asked for."""
    from tracegrade.store.outdated import rebuild_steps
    from tracegrade.store.rebuild_progress import RebuildDone, start_rebuild

    yield start_rebuild(store, scope)
    yield from rebuild_steps(store, scope, step=batch, max_bytes=mapping_batch_bytes)
    yield RebuildDone()


def _started(event: RebuildStart | RebuiltStep | RebuildDone) -> RebuildStart:
    """The rebuild's first report, which says how many traces it selected."""
    from tracegrade.errors import StoreError
    from tracegrade.store.rebuild_progress import RebuildStart

    if not isinstance(event, RebuildStart):
        raise StoreError(f"the rebuild reported {event} before saying how many traces it selected")
    return event


def _next_step(progress: Progress) -> RebuiltStep | None:
    """The rebuild's next step committed, or None once it is done."""
    from tracegrade.errors import StoreError
    from tracegrade.store.rebuild_progress import RebuildDone, RebuildStart

    event = next(progress)
    if isinstance(event, RebuildStart):
        raise StoreError("the rebuild reported its start twice")
    return None if isinstance(event, RebuildDone) else event


def _make_room(store: StoreBackend | None) -> str:
    """Where to make room after a full disk: a lake's steps write Parquet files under its data path, which may be on
    a disk of its own (the catalog is in PostgreSQL); a file's (also one a server rebuilds: None), next to the
    file."""
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


def _open(
    store_path: Path | str, lake_data: Path | None, token: str | None
) -> tuple[StoreBackend, None] | tuple[None, RemoteStore]:
    """The store read-write (a file that exists and no other process holds, or a lake that exists: a mistyped
    catalog database must not get a new, empty lake), or else the server that holds the file."""
    from tracegrade.errors import StoreLockedError
    from tracegrade.store.access import server_holding
    from tracegrade.store.database import store_not_found
    from tracegrade.store.lake_location import is_lake_location
    from tracegrade.store.trace_store import TraceStore

    if is_lake_location(store_path):
        from tracegrade.store.lake import LakeStore

        data_path = checked_lake(str(store_path), lake_data, "rebuild", "")  # a lake: the last argument is unused
        return LakeStore(str(store_path), data_path=data_path, create=False), None
    path = Path(store_path)
    if not path.exists():
        raise store_not_found(path)  # --store's default names a file: a typo must not create one
    try:
        return TraceStore(path), None
    except StoreLockedError as exc:
        server = server_holding(path, token)
        if server is None:
            raise UsageProblem(
                f"{exc}. A rebuild writes the store, and no `tracegrade serve` answers for it: stop that process, "
                "then run it again. Nothing was rebuilt"
            ) from None
    if mapping_batch_bytes_given() is not None:
        raise UsageProblem(
            f"{mapping_batch_bytes_given()} does not apply to a store that `tracegrade serve` at {server.url} holds: "
            "the server rebuilds it and maps with its own --mapping-batch-bytes (leave it out, or restart the "
            "server with another). Nothing was rebuilt"
        )
    server.timeout = STEP_ANSWER_SECONDS
    return None, server
