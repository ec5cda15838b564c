"""The ``--store`` parameter type: a DuckDB file (a Path) or a DuckLake location (kept as the string given).

A lake location is a libpq conninfo after ``ducklake:postgres:``; as a Path it would lose the ``//`` of a
``postgresql://`` URI, so it is never turned into one. A malformed one is refused here, before a command
would create a DuckDB file named after it. An existing file that is not a DuckDB database (a report, an eval
set…) is refused here too, by its header: DuckDB's own errors for such a file are misleading (it reads a
``.json`` path as a JSON file to query).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracegrade.store.lake_location import catalog_conninfo, is_lake_location
from tracegrade.store.store_option import point_at_a_store

__all__ = ["STORE_LOCATION", "StoreLocation"]


class StoreLocation(click.ParamType):
    name = "store"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Path | str:
        if isinstance(value, Path):
            return value
        text = str(value)
        if is_lake_location(text):
            try:
                catalog_conninfo(text)
            except ValueError as exc:
                self.fail(str(exc), param, ctx)
            return text
        path = Path(text)
        if path.is_dir():
            self.fail(f"{path} is a directory; give a store file such as {path / 'tracegrade.duckdb'}", param, ctx)
        if _foreign_file(path):
            self.fail(f"{path} is not a DuckDB file (it lacks DuckDB's header); {point_at_a_store()}", param, ctx)
        return path


_MAGIC = slice(8, 12)  # a DuckDB file: an 8-byte checksum, then b"DUCK"


def _foreign_file(path: Path) -> bool:
    """Whether ``path`` is a non-empty file that is not a DuckDB database (an empty or unreadable one is left
    to the store's own checks)."""
    if not path.is_file():  # opening a FIFO to look would block
        return False
    try:
        with path.open("rb") as fh:
            head = fh.read(_MAGIC.stop)
    except OSError:
        return False
    return bool(head) and head[_MAGIC] != b"DUCK"


STORE_LOCATION = StoreLocation()
