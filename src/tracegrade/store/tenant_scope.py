"""TenantStore: one tenant's side of a store, what every read made on a tenant's behalf goes through.

Its ``query`` and ``query_arrow`` run on the store with the tenant (``TraceStore.query(tenant=...)``): the
statement sees that tenant's rows of every table and nothing else, whatever it joins, unions or nests. The
receiver hands one to each request of a tenant (the query endpoint, the web UI, the MCP tools), the grading
worker to each job, and the CLI's ``--tenant`` to the commands that open a store directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from tracegrade.store.query_control import QueryControl
from tracegrade.store.results import QueryResult

__all__ = ["TenantStore"]


class TenantStore:
    """``store`` (a TraceStore or LakeStore) as ``tenant`` sees it; closing it closes ``store``."""

    def __init__(self, store: Any, tenant: str) -> None:
        self.store = store
        self.tenant = tenant

    def __enter__(self) -> TenantStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult:
        result: QueryResult = self.store.query(sql, params, control=control, tenant=self.tenant)
        return result

    def query_arrow(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> pa.Table:
        table: pa.Table = self.store.query_arrow(sql, params, control=control, tenant=self.tenant)
        return table

    def close(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"TenantStore({self.store!r}, tenant={self.tenant!r})"
