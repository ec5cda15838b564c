"""The same test on a DuckDB file store and on a lake: a parametrized ``store_kind`` and what differs.

``open_store(kind, ...)`` opens a new read-write store of either kind; ``location(store)`` is what
``--store`` takes for it; ``set_job_columns`` changes grading jobs in whichever queue the store keeps
(the file's ``grading_jobs`` table, or the lake's, in its catalog's PostgreSQL database).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.pg_cluster import PgServer
from tracegrade.store import TraceStore

__all__ = ["STORE_KINDS", "location", "open_store", "set_job_columns"]

STORE_KINDS = pytest.mark.parametrize("store_kind", ["file", "lake"])


def open_store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> TraceStore:
    """A new read-write store: a DuckDB file under ``tmp_path``, or a lake on the session's PostgreSQL."""
    if kind == "file":
        return TraceStore(tmp_path / "store.duckdb")
    from tracegrade.store.lake import LakeStore

    pg: PgServer = request.getfixturevalue("pg_server")
    return LakeStore(f"ducklake:postgres:{pg.new_database()}", data_path=tmp_path / "lake-data")


def location(store: TraceStore) -> str:
    """The store's ``--store`` value."""
    return str(getattr(store, "location", store.path))


def set_job_columns(store: TraceStore, job_id: str, **values: Any) -> None:
    """Set columns of one grading job (``lease_expires=...``, ``created_at=...``) behind the worker's back."""
    assignments = ", ".join(f"{name} = ?" for name in values)
    if isinstance(store.path, Path):
        store.execute_write(f"UPDATE grading_jobs SET {assignments} WHERE job_id = ?", [*values.values(), job_id])
        return
    import psycopg

    from tracegrade.store.lake_location import catalog_conninfo

    with psycopg.connect(catalog_conninfo(location(store)), autocommit=True) as con:
        con.execute(
            f"UPDATE tracegrade.grading_jobs SET {assignments.replace('?', '%s')} WHERE job_id = %s",
            [*values.values(), job_id],
        )
