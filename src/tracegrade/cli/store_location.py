"""The ``--store`` parameter type: a DuckDB file (a Path) or a DuckLake location (kept as the string given).

A lake location is a libpq conninfo after ``ducklake:postgres:``; as a Path it would lose the ``//`` of a
``postgresql://`` URI, so it is never turned into one. A malformed one is refused here, before a command
would create a DuckDB file named after it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tracegrade.store.lake_location import catalog_conninfo, is_lake_location

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
        return path


STORE_LOCATION = StoreLocation()
