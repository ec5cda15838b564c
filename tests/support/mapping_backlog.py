"""A receiver that starts on a backlog of traces without trajectories, so its first build claim holds them all.

The traces go in over real OTLP to a first ``tracegrade serve``; then either the file's trajectory rows are
dropped (as the schema migration of version 2 did: the next receiver finds every trace stale and maps them all
at its start), or, on a lake, the first receiver ran with ``--no-build-trajectories`` and left them queued in the
catalog. The second receiver, started by the caller, then claims every trace at once.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan

from tests.support.export_load import export_all
from tests.support.lake_serve import LakeServerProcess
from tests.support.server_process import ServerProcess
from tracegrade.store import TraceStore
from tracegrade.store.trajectories import TRAJECTORY_TABLES

__all__ = ["file_backlog", "lake_backlog"]


def file_backlog(store: Path, traces: Sequence[list[ReadableSpan]]) -> None:
    """``traces`` received by a receiver on the file ``store`` (stopped), whose trajectory rows are then deleted."""
    with ServerProcess(store) as first:
        export_all(first.http_url, traces)
        assert first.terminate() == 0, first.log()
    with TraceStore(store) as writer:
        for table in TRAJECTORY_TABLES:
            writer.execute_write(f"DELETE FROM {table}")


def lake_backlog(location: str, data: Path, journal: Path, traces: Sequence[list[ReadableSpan]]) -> None:
    """``traces`` received by a receiver on the lake that builds no trajectories (stopped): all queued for a build."""
    with LakeServerProcess(location, data, journal, extra_args=("--no-build-trajectories",)) as first:
        export_all(first.http_url, traces)
        assert first.terminate() == 0, first.log()
