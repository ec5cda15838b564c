"""The ``--store``/``--lake-data`` options of the commands that work on a lake only (maintain, build)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from tracegrade.cli.common import UsageProblem
from tracegrade.cli.store_access import DEFAULT_STORE, lake_data_option
from tracegrade.ingest.settings import ENV_VARS

__all__ = ["checked_lake", "lake_options"]

F = TypeVar("F", bound=Callable[..., Any])


def lake_options(func: F) -> F:
    """``--store`` (a lake location) and ``--lake-data``, each also read from the environment variable `serve`
    reads it from."""
    func = lake_data_option(func)
    return click.option(
        "--store",
        "location",
        envvar=ENV_VARS["store"],
        show_envvar=True,
        default=DEFAULT_STORE,
        show_default=True,
        help="The lake: ducklake:postgres:<libpq conninfo>.",
    )(func)


def checked_lake(location: str, lake_data: Path | None, command: str, on_a_file: str) -> Path:
    """The data path, once ``location`` is a lake and ``lake_data`` is given; UsageProblem otherwise
    (``on_a_file`` says why ``command`` has nothing to do on a DuckDB file)."""
    from tracegrade.store.lake_location import catalog_conninfo, is_lake_location

    if not is_lake_location(location):
        raise UsageProblem(
            f"`tracegrade {command}` works on a lake store, and {location} is a DuckDB store file, {on_a_file}; "
            "give --store ducklake:postgres:<libpq conninfo>"
        )
    try:
        catalog_conninfo(location)
    except ValueError as exc:
        raise UsageProblem(str(exc)) from None
    if lake_data is None:
        raise UsageProblem(
            f"`tracegrade {command}` needs the lake's data path: add --lake-data PATH (the receivers' path)"
        )
    return lake_data
