"""``tracegrade serve`` on a lake in a child process, its writer held back at will, and span counts read back from a
lake."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.server_process import ServerProcess

__all__ = ["LakeServerProcess", "lake_span_counts", "store_copies_again", "writer_held_back"]


class LakeServerProcess(ServerProcess):
    """``tracegrade serve --store ducklake:... --lake-data DATA --journal JOURNAL`` (sidecar beside the journal)."""

    def __init__(self, location: str, lake_data: Path, journal: Path, **options: object) -> None:
        extra = ("--lake-data", str(lake_data), "--journal", str(journal), *options.pop("extra_args", ()))  # type: ignore[misc]
        super().__init__(journal, extra_args=extra, **options)  # type: ignore[arg-type]
        self.store = location  # type: ignore[assignment]  # passed to --store as given
        self.journal = journal

    @property
    def sidecar(self) -> Path:
        return Path(f"{self.journal}.server.json")


@contextmanager
def writer_held_back(location: str) -> Iterator[None]:
    """The lake's write gate held exclusive (as a deletion takes it): a receiver's writer waits at it with what it
    took from its queue, so the requests after those wait for room in the queue, each holding an in-flight slot."""
    from tracegrade.store.lake_location import catalog_conninfo
    from tracegrade.store.lake_write_gate import WriteGate

    gate = WriteGate(catalog_conninfo(location), lambda why: None)
    try:
        with gate.exclusive():
            yield
    finally:
        gate.close()


def lake_span_counts(location: str, table: str = "spans") -> dict[tuple[str, str], int]:
    """How many rows each (trace_id, span_id) has in ``table`` of the lake (``spans``: as queried)."""
    from tracegrade.store.lake import LakeStore

    with LakeStore(location, read_only=True) as reader:
        rows = reader.query(f"SELECT trace_id, span_id, count(*) FROM {table} GROUP BY ALL").rows
    return {(trace_id, span_id): count for trace_id, span_id, count in rows}


def store_copies_again(location: str, table: str, where: str) -> int:
    """Insert a second copy of ``table``'s raw rows matching ``where``, as two receivers racing on one
    span both store it (each looks the span up before the other commits); how many rows were copied."""
    import duckdb

    from tracegrade.store.lake_extensions import load_lake_extensions
    from tracegrade.store.lake_location import catalog_conninfo

    con = duckdb.connect(":memory:", config={"autoinstall_known_extensions": "false"})
    try:
        load_lake_extensions(con)
        con.execute(f"ATTACH 'ducklake:postgres:{catalog_conninfo(location)}' AS lake")
        before = con.execute(f"SELECT count(*) FROM lake.raw.{table}").fetchone()[0]  # type: ignore[index]
        con.execute(f"INSERT INTO lake.raw.{table} SELECT * FROM lake.raw.{table} WHERE {where}")
        return con.execute(f"SELECT count(*) FROM lake.raw.{table}").fetchone()[0] - before  # type: ignore[index]
    finally:
        con.close()
