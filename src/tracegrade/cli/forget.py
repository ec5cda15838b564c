"""``tracegrade forget``: delete traces on request (a user's conversation, under privacy law), for good.

On a lake, or a DuckDB file no server holds, it opens the store and forgets the traces there; on a file that
`tracegrade serve` holds, it asks that server (``POST /v1/forget``, whose token decides the tenant). The traces
are given by id, or selected with ``--where`` over the traces table (as the same tenant sees it). Traces whose
spans are stored but whose trajectory is not built yet are not in that table: on a store opened here they are
built first, and through a server ``forget`` waits for the server to build them, so that ``--where`` sees them.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.cli.store_access import chosen_tenant, lake_data_option, open_writable_store, store_options
from tracegrade.store.predicates import isolated_predicate

__all__ = ["command"]

SHOWN_IDS = 20  # trace ids a dry run lists
_WHOLE_ID = re.compile(r"[0-9a-f]{32}")  # a trace id as the receiver stores it (checked_trace_ids lower-cases it)
SERVER_BUILD_WAIT = 30.0  # seconds --where waits for a server to build the trajectories still waiting
# the traces (as the caller's tenant sees the store) whose spans are stored but that have no trajectory yet
_UNBUILT_SQL = (
    "SELECT DISTINCT trace_id FROM spans s "
    "WHERE NOT EXISTS (SELECT 1 FROM traces t WHERE t.tenant = s.tenant AND t.trace_id = s.trace_id)"
)


@dataclass(frozen=True)
class _Target:
    """Where the traces are forgotten: a store opened here, or the server that holds it."""

    query: Callable[[str, list[Any]], list[tuple[Any, ...]]]  # a read-only statement, as the tenant sees the store
    forget: Callable[[list[str], bool], Any]  # (trace ids, delete_runs) -> Deleted
    # bring the trajectories still waiting to be built into the traces table (built here, or by the server)
    see_waiting: Callable[[], None]


@click.command("forget")
@store_options
@lake_data_option
@click.argument("trace_ids", nargs=-1)
@click.option(
    "--ids-from",
    type=click.File("r", encoding="utf-8"),
    help="Also read trace ids from this file, one per line ('-': standard input).",
)
@click.option(
    "--where",
    help='Also forget the traces this SQL predicate over the traces table selects, e.g. "conversation_id = '
    "'c-42'\". Traces whose trajectory is still waiting to be built are built first (through a server, it waits "
    f"up to {SERVER_BUILD_WAIT:.0f} s for the server to build them).",
)
@click.option(
    "--delete-runs",
    is_flag=True,
    help="Also delete, whole, the runs people recorded (grade, CI, live) that graded one of the traces.",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Say how many traces would be forgotten, and which, and the recorded runs that graded them; forget none.",
)
@friendly_errors
def command(
    store_path: Path | str,
    token: str | None,
    lake_data: Path | None,
    trace_ids: tuple[str, ...],
    ids_from: IO[str] | None,
    where: str | None,
    delete_runs: bool,
    dry_run: bool,
) -> None:
    """Delete every record of the traces TRACE_IDS (spans, log records, evaluation events, trajectories,
    grading jobs, an online worker's cases of them) and keep them forgotten: spans of theirs that arrive later
    are dropped.

    The traces are --tenant's ('default' without it); through a server, its token's. Runs people record
    (grade, CI, live) hold their own copy of what they graded: they are kept and named, or deleted whole with
    --delete-runs.
    """
    from tracegrade.errors import StoreError
    from tracegrade.store.lake_location import is_lake_location
    from tracegrade.store.rows import sql_string_in
    from tracegrade.store.trace_deletion import MAX_FORGET_IDS, Deleted, checked_trace_ids, recorded_runs_sql

    listed = list(trace_ids) + ([line.strip() for line in ids_from if line.strip()] if ids_from else [])
    if not listed and where is None:
        raise click.UsageError("give the ids of the traces to forget (arguments or --ids-from), or --where")
    try:
        ids = checked_trace_ids(listed, "the trace ids", limit=None) if listed else []
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    with _target(store_path, token, lake_data) as target:
        _refuse_prefixes(target, ids)
        if where is not None:
            target.see_waiting()
            predicate = isolated_predicate(where)
            try:
                rows = target.query(f"SELECT DISTINCT trace_id FROM traces WHERE {predicate} ORDER BY trace_id", [])
            except StoreError as exc:
                raise UsageProblem(f"--where {where!r} is not a valid predicate over the traces table: {exc}") from None
            ids = list(dict.fromkeys([*ids, *(str(row[0]) for row in rows)]))
        if not ids:
            click.echo(f"no trace matched --where {where!r}; nothing forgotten")
            return
        if dry_run:
            click.echo(f"would forget {len(ids)} trace(s): {_listed(ids)}")
            among, params = sql_string_in(ids)
            runs = [str(row[0]) for row in target.query(recorded_runs_sql(among), params)]
            if runs:
                fate = "delete" if delete_runs else "keep (--delete-runs deletes them)"
                click.echo(f"recorded run(s) that graded them, which it would {fate}: {_listed(runs)}")
            return
        deleted = Deleted()
        try:
            for start in range(0, len(ids), MAX_FORGET_IDS):  # one transaction, and one request, per chunk
                deleted += target.forget(ids[start : start + MAX_FORGET_IDS], delete_runs)
        except StoreError as exc:
            done = f" (before it: {deleted.summary('forgot')})" if deleted != Deleted() else ""
            raise click.ClickException(f"{exc}{done}; run it again: forgetting twice does no harm") from None
    click.echo(deleted.summary("forgot"))
    if is_lake_location(store_path):
        click.echo(
            "the lake's Parquet files still hold the deleted rows (DuckLake marks them deleted) until `tracegrade "
            "maintain --purge-deleted` rewrites those files; the files replaced go once older than its --keep"
        )
    else:
        click.echo(
            "the store file still holds the deleted rows' bytes (DuckDB marks them deleted) until `tracegrade "
            "maintain --purge-deleted` rewrites it (through the server that holds the file, if one does)"
        )
    if deleted.runs_kept:
        click.echo(
            f"kept {len(deleted.runs_kept)} recorded run(s) that graded these traces and hold a copy of what they "
            f"said: {_listed(list(deleted.runs_kept))}; run the command again with --delete-runs to delete them"
        )


def _refuse_prefixes(target: _Target, ids: list[str]) -> None:
    """Refuse an id that is no stored trace's but the beginning of one or more: `show` takes a prefix, so an operator
    may give `forget` one too, and forgetting it as given would delete nothing, say "forgot 0 trace(s)" and leave
    the trace they meant in the store. So is an id written as other tools show it (see ``_refuse_other_spelling``).
    (An id of nothing stored is forgotten all the same: its spans may be on their way.)"""
    from tracegrade.store.rows import sql_string_in

    partial = [trace_id for trace_id in ids if not _WHOLE_ID.fullmatch(trace_id)]
    if not partial:
        return
    among, params = sql_string_in(partial)
    stored = {
        str(row[0])
        for row in target.query(
            f"SELECT trace_id FROM spans WHERE trace_id IN {among} "
            f"UNION SELECT trace_id FROM traces WHERE trace_id IN {among}",
            params * 2,
        )
    }
    for trace_id in partial:
        if trace_id in stored:
            continue
        _refuse_other_spelling(trace_id)
        begun = [
            str(row[0])
            for row in target.query(
                "SELECT DISTINCT trace_id FROM spans WHERE starts_with(trace_id, ?) ORDER BY 1 LIMIT 4", [trace_id]
            )
        ]
        if begun:
            raise UsageProblem(
                f"{trace_id!r} is not a stored trace's id but the beginning of {_listed(begun[:3])}"
                f"{', …' if len(begun) > 3 else ''}: forget takes whole trace ids (32 hex digits), so that a short "
                "prefix cannot forget another trace than the one meant; give the whole id (`tracegrade traces` "
                "lists them). Nothing was forgotten"
            )


def _refuse_other_spelling(trace_id: str) -> None:
    """Refuse a trace id that no stored trace has, written as a UUID (``4bf92f35-77b3-…``), with ``0x`` or in
    braces, as other tools show trace ids: the receiver stores 32 hex digits, so forgetting it as given would delete
    nothing, say "forgot 0 trace(s)" and leave the trace, and its spans still on their way, in the store."""
    digits = re.sub(r"[-{}]", "", trace_id.lower()).removeprefix("0x")
    if _WHOLE_ID.fullmatch(digits):
        raise UsageProblem(
            f"{trace_id!r} is a trace id written as another tool shows it; the store keeps trace ids as 32 hex "
            f"digits: give it as {digits}. Nothing was forgotten"
        )


def _listed(values: list[str]) -> str:
    return ", ".join(values[:SHOWN_IDS]) + (", …" if len(values) > SHOWN_IDS else "")


@contextmanager
def _target(store_path: Path | str, token: str | None, lake_data: Path | None) -> Iterator[_Target]:
    """The store opened read-write (a lake, or a file no server holds), else the server holding the file."""
    from tracegrade.errors import StoreLockedError
    from tracegrade.store.access import server_holding
    from tracegrade.store.database import store_not_found
    from tracegrade.store.lake_location import is_lake_location
    from tracegrade.store.rebuilder import rebuild_traces
    from tracegrade.store.tenancy import DEFAULT_TENANT

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
        yield _Target(
            lambda sql, params: remote.query(sql, params).rows,
            lambda ids, delete_runs: remote.forget(ids, delete_runs=delete_runs),
            lambda: _await_server_builds(lambda: {str(row[0]) for row in remote.query(_UNBUILT_SQL).rows}),
        )
        return
    tenant = chosen_tenant() or DEFAULT_TENANT
    try:
        yield _Target(
            lambda sql, params: store.query(sql, params, tenant=tenant).rows,
            lambda ids, delete_runs: store.forget(ids, tenant, delete_runs=delete_runs),
            lambda: _say_built(rebuild_traces(store, store.stale_trajectories(tenant=tenant))),
        )
    finally:
        store.close()


def _say_built(count: int) -> None:
    if count:
        click.echo(f"built the trajectories of {count} waiting trace(s) first, so that --where sees them")


def _await_server_builds(waiting_now: Callable[[], set[str]]) -> None:
    """Wait until the server has built a trajectory for each trace that had none (``waiting_now``: the ids of those
    traces now), at most ``SERVER_BUILD_WAIT`` seconds. (A trace whose trajectory is only older than its newest
    span is already in the traces table.)"""
    from tracegrade.errors import StoreError

    try:
        waiting = waiting_now()
        if waiting:
            click.echo(
                f"waiting for the server to build the trajectories of {len(waiting)} trace(s), so that --where "
                "sees them"
            )
        deadline = time.monotonic() + SERVER_BUILD_WAIT
        while waiting and time.monotonic() < deadline:
            time.sleep(0.25)
            waiting &= waiting_now()  # only the traces that were waiting: new ones may keep arriving
    except StoreError as exc:  # say what --where may miss, and forget what it sees
        click.echo(
            f"warning: could not ask the server which traces still wait for their trajectory ({exc}), so --where "
            "may miss the newest traces: run the command again later",
            err=True,
        )
        return
    if waiting:
        click.echo(
            f"warning: the server had still not built the trajectories of {len(waiting)} trace(s) after "
            f"{SERVER_BUILD_WAIT:.0f} s (it is behind), so --where cannot see them: run the command again later",
            err=True,
        )
