"""A lake's forgotten traces, in its catalog's PostgreSQL database: ``tracegrade.forgotten_traces``.

Every write of a store looks up the forgotten traces among those it holds (``trace_deletion``). On a lake that
look-up is a PostgreSQL query by primary key rather than a scan of a DuckLake table, whose catalog round trips
would add to each commit several times what the query costs (bench/RESULTS.md, "Forgetting traces"). The lake
shows the table as its ``forgotten_traces`` view, through the read-only attachment that shows ``grading_jobs``
(``lake_schema``).

The order holds through the lake's write gate: a forget holds it exclusive while it adds the rows here
(committed first) and deletes the traces' rows from the lake; every write holds it shared around its
transaction and looks the rows up inside it. So a write committed before the forget has its rows deleted, and
any later one finds the traces forgotten.

The two commits are no one transaction, though: a forget that dies between them (SIGKILL, the machine lost) leaves
its traces listed here with their rows still in the lake, and its user told nothing. Each maintenance pass finishes
such forgets (``LakeStore.maintain``): ``unfinished_sql`` finds the traces listed here that the lake still holds
rows of, and the store forgets them again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tracegrade.store.catalog_connection import PG_NOW, CatalogConnection, create_in_catalog, pg_columns
from tracegrade.store.lake_jobs import JOBS_SCHEMA
from tracegrade.store.lake_schema import JOBS_ALIAS, RAW_SCHEMA
from tracegrade.store.tenancy import TraceKey
from tracegrade.store.trace_deletion import HELD_TABLES

if TYPE_CHECKING:
    from collections.abc import Collection, Sequence

    from tracegrade.store.lake_schema import Column

__all__ = ["CatalogForgottenTraces", "ensure_forgotten_table", "unfinished_sql"]

_TABLE = f"{JOBS_SCHEMA}.forgotten_traces"


def unfinished_sql(catalog: str) -> str:
    """A query of the forgotten traces (tenant, trace_id) that the lake attached as ``catalog`` still holds rows of,
    each once: those of forgets that died before their deletions committed. Read through the attachment of the
    catalog's database, on any cursor of the store.

    One pass over the key columns of the tables that say whether a trace is held (every copy of their rows),
    probing a hash table of the forgotten keys (forgotten traces are few beside stored rows); a read, outside the
    write gate: nearly every time there is none to find, and no writer waits for it."""
    held = " UNION ALL ".join(f"SELECT tenant, trace_id FROM {catalog}.{RAW_SCHEMA}.{table}" for table in HELD_TABLES)
    return (
        f"SELECT DISTINCT h.tenant, h.trace_id FROM ({held}) h "
        f"SEMI JOIN {JOBS_ALIAS}.{_TABLE} f USING (tenant, trace_id) ORDER BY ALL"
    )


def ensure_forgotten_table(conninfo: str, columns: Sequence[Column]) -> None:
    """Create ``tracegrade.forgotten_traces`` in the catalog's database, if it is not there."""
    listed = pg_columns("forgotten_traces", columns)
    create_in_catalog(
        conninfo,
        "creating the table of forgotten traces",
        f"CREATE SCHEMA IF NOT EXISTS {JOBS_SCHEMA}",
        f"CREATE TABLE IF NOT EXISTS {_TABLE} ({', '.join(listed)}, PRIMARY KEY (tenant, trace_id))",
    )


class CatalogForgottenTraces:
    """The forgotten traces of the lake whose catalog is at ``conninfo``."""

    def __init__(self, conninfo: str) -> None:
        self._catalog = CatalogConnection(conninfo)

    def add(self, keys: Collection[TraceKey]) -> None:
        """Remember ``keys`` as forgotten (at PostgreSQL's clock); those already forgotten keep their time."""
        with self._catalog.cursor("remembering forgotten traces") as cursor:
            cursor.execute(
                f"INSERT INTO {_TABLE} (tenant, trace_id, forgotten_at) SELECT k.tenant, k.trace_id, {PG_NOW} "
                "FROM unnest(%s::text[], %s::text[]) AS k(tenant, trace_id) ON CONFLICT DO NOTHING",
                _columns(keys),
            )

    def among(self, keys: Collection[TraceKey]) -> set[TraceKey]:
        """Those of ``keys`` that were forgotten."""
        with self._catalog.cursor("looking up forgotten traces") as cursor:
            rows = cursor.execute(
                f"SELECT f.tenant, f.trace_id FROM {_TABLE} f "
                "JOIN unnest(%s::text[], %s::text[]) AS k(tenant, trace_id) USING (tenant, trace_id)",
                _columns(keys),
            ).fetchall()
        return {(str(tenant), str(trace_id)) for tenant, trace_id in rows}

    def close(self) -> None:
        self._catalog.close()


def _columns(keys: Collection[TraceKey]) -> list[list[str]]:
    return [[tenant for tenant, _ in keys], [trace_id for _, trace_id in keys]]
