"""One psycopg connection to a lake's catalog database (PostgreSQL), for the queues kept beside the catalog.

The build queue (``lake_builds``), the grading job queue (``lake_jobs``) and the forgotten traces
(``lake_forgotten``) each hold one: statements run
under a lock, each block in one transaction, and any PostgreSQL error becomes a StoreError that names what
was being done (never the password). A connection that broke (PostgreSQL restarted, the network dropped)
is dropped, and the next block opens another, so a caller rides out an outage by trying again.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from tracegrade.errors import StoreError
from tracegrade.store.lake_location import redacted

if TYPE_CHECKING:
    import psycopg

    from tracegrade.store.lake_schema import Column

__all__ = ["CONNECT_TIMEOUT", "PG_NOW", "CatalogConnection", "create_in_catalog", "pg_columns"]

CONNECT_TIMEOUT = 5  # seconds; an unreachable catalog fails a call quickly rather than hanging the thread
# PostgreSQL's clock when the transaction began (one time for all its rows), as the UTC TIMESTAMP the store keeps
PG_NOW = "(now() AT TIME ZONE 'UTC')"
_PG_TYPES = {
    "VARCHAR": "text",
    "JSON": "text",
    "TIMESTAMP": "timestamp",
    "INTEGER": "integer",
    "BIGINT": "bigint",
    "DOUBLE": "double precision",
    "BOOLEAN": "boolean",
}


def pg_columns(table: str, columns: Sequence[Column]) -> list[str]:
    """``"name" type`` for each of a store table's columns (``lake_schema.Column``), in PostgreSQL's types."""
    listed = []
    for column in columns:
        if column.data_type not in _PG_TYPES:
            raise AssertionError(f"no PostgreSQL type for {table}.{column.name} ({column.data_type})")
        listed.append(f'"{column.name}" {_PG_TYPES[column.data_type]}')
    return listed


class CatalogConnection:
    """The catalog database at ``conninfo``, through one connection used under a lock."""

    def __init__(self, conninfo: str) -> None:
        self._conninfo = conninfo
        self.where = redacted(conninfo)
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[Any] | None = None

    @contextmanager
    def cursor(self, doing: str) -> Iterator[psycopg.Cursor[Any]]:
        """A cursor in one transaction, committed when the block ends; any PostgreSQL error becomes a
        StoreError (the connection is then dropped and made again at the next call)."""
        from tracegrade.store.lake_extensions import require_psycopg

        psycopg = require_psycopg()
        with self._lock:
            try:
                if self._connection is None or self._connection.closed:
                    self._connection = psycopg.connect(
                        self._conninfo, autocommit=True, connect_timeout=CONNECT_TIMEOUT, application_name="tracegrade"
                    )
                with self._connection.transaction(), self._connection.cursor() as cursor:
                    yield cursor
            except psycopg.Error as exc:
                if self._connection is not None and (
                    self._connection.closed or isinstance(exc, psycopg.OperationalError)
                ):
                    self._connection.close()
                    self._connection = None
                raise StoreError(
                    f"{doing} in the lake's catalog ({self.where}) failed: {redacted(str(exc).strip())}"
                ) from None

    def create(self, doing: str, *statements: str) -> None:
        """Run DDL in one transaction. ``CREATE … IF NOT EXISTS`` run by two processes at once can still
        collide in PostgreSQL's own catalog (a unique violation): the loser tries again, and finds it done."""
        from tracegrade.store.lake_extensions import require_psycopg

        psycopg = require_psycopg()
        for attempt in range(3):
            try:
                with self.cursor(doing) as cursor:
                    for statement in statements:
                        cursor.execute(statement)
                return
            except StoreError as exc:
                if attempt == 2 or not isinstance(exc.__context__, psycopg.errors.UniqueViolation):
                    raise

    def close(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.close()
                self._connection = None


def create_in_catalog(conninfo: str, doing: str, *statements: str) -> None:
    """Run DDL in the catalog's database at ``conninfo`` on a connection of its own (``CatalogConnection.create``)."""
    catalog = CatalogConnection(conninfo)
    try:
        catalog.create(doing, *statements)
    finally:
        catalog.close()
