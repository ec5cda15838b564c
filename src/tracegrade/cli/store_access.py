"""What the store commands share: the --store/--token/--tenant options, opening the store, printing rows."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from tracegrade.cli.common import UsageProblem
from tracegrade.cli.store_location import STORE_LOCATION
from tracegrade.ingest.settings import ENV_VARS
from tracegrade.output_files import write_text_file
from tracegrade.store.access import ReadableStore, open_store_for_read
from tracegrade.store.journal import journal_directory, unstored_journal_bytes
from tracegrade.store.lake_location import is_lake_location
from tracegrade.store.remote import RemoteStore
from tracegrade.store.results import QueryResult, interval_text, json_safe, non_finite_text
from tracegrade.store.tenancy import check_tenant_name
from tracegrade.store.tenant_scope import TenantStore
from tracegrade.store.trace_store import TraceStore

if TYPE_CHECKING:
    from tracegrade.store.backend import StoreBackend

__all__ = [
    "DEFAULT_STORE",
    "as_tenant",
    "cell_text",
    "chosen_tenant",
    "clip",
    "display",
    "emit",
    "lake_data_option",
    "open_until_stopped",
    "open_writable_store",
    "reading_store",
    "render_csv",
    "render_json",
    "render_table",
    "store_option",
    "store_options",
    "tenant_option",
    "terminal_text",
    "token_option",
    "warn_of_unstored_journal",
]

DEFAULT_STORE = "tracegrade.duckdb"  # the read commands' store; `serve` must be told where to write
REOPEN_SECONDS = 2.0  # between attempts to open again a store whose catalog or data path was out of reach
F = TypeVar("F", bound=Callable[..., Any])
S = TypeVar("S")


store_option = click.option(
    "--store",
    "store_path",
    type=STORE_LOCATION,
    envvar=ENV_VARS["store"],
    show_envvar=True,
    default=DEFAULT_STORE,
    show_default=True,
    help="DuckDB store file. While `tracegrade serve` holds it, read commands query the server instead. "
    "Or a lake: ducklake:postgres:<libpq conninfo>.",
)
lake_data_option = click.option(
    "--lake-data",
    type=click.Path(file_okay=False, path_type=Path),
    envvar=ENV_VARS["lake_data"],
    show_envvar=True,
    help="Where a lake's Parquet files are: the path its receivers were given (writing to a lake needs it).",
)
token_option = click.option(
    "--token",
    envvar=ENV_VARS["token"],
    show_envvar=True,
    default=None,
    help="Bearer token of the running `tracegrade serve`, used when the server holds the store.",
)


def open_writable_store(location: Path | str, lake_data: Path | None, doing: str) -> StoreBackend:
    """The store opened read-write: the DuckDB file (StoreLockedError while a server holds it), or the
    lake, which needs its data path; ``doing`` says what for, in the error when that is missing."""
    from tracegrade.store.backend import open_store

    if is_lake_location(location) and lake_data is None:
        raise UsageProblem(
            f"{doing} in a lake needs its data path: add --lake-data PATH (the path its receivers were given), "
            "or set TRACEGRADE_LAKE_DATA"
        )
    return open_store(location, data_path=lake_data)


_TENANT = "tracegrade.tenant"  # where --tenant is kept in the click context for the store openers below


def _remember_tenant(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None:
        try:
            check_tenant_name(value, "--tenant")
        except ValueError as exc:
            raise click.BadParameter(str(exc).removeprefix("--tenant: "), ctx, param) from None
    ctx.meta[_TENANT] = value
    return value


tenant_option = click.option(
    "--tenant",
    envvar="TRACEGRADE_TENANT",
    show_envvar=True,
    default=None,
    expose_value=False,
    callback=_remember_tenant,
    help="Open the store as this tenant: read only its rows, and record runs and import spans as its own. "
    "Without it a store opened directly shows every tenant's rows (an operator's view) and records as tenant "
    "'default'; through a running server its token decides the tenant.",
)


def chosen_tenant() -> str | None:
    """The command's ``--tenant`` (None when not given, or outside a command)."""
    ctx = click.get_current_context(silent=True)
    return ctx.meta.get(_TENANT) if ctx is not None else None


def as_tenant(store: Any) -> Any:
    """``store`` as the ``--tenant`` given sees it (a store opened directly), or as it is without ``--tenant``.

    Through a server the token decides the tenant, so ``--tenant`` there is refused rather than ignored: the
    answers would be the token's tenant's while the user believes they are another's.
    """
    tenant = chosen_tenant()
    if tenant is None:
        return store
    if isinstance(store, RemoteStore):
        raise UsageProblem(
            f"--tenant {tenant} does not apply through a server: the server at {store.url} answers as its "
            f"token's tenant. Pass a token of tenant {tenant} with --token and leave out --tenant, or stop the "
            "server and open the store file with --tenant"
        )
    return TenantStore(store, tenant)


def open_until_stopped(open_store: Callable[[], S], wait: Callable[[float], bool]) -> S | None:
    """``open_store()``, tried again every ``REOPEN_SECONDS`` while it raises StoreError (a lake's catalog or
    data path out of reach), each failure said on stderr; None once ``wait(seconds)`` (which waits and
    returns True when the caller is being stopped) says stop."""
    from tracegrade.errors import StoreError

    while True:
        try:
            return open_store()
        except StoreError as exc:
            click.echo(f"{exc}; trying again in {REOPEN_SECONDS:g} s", err=True)
        if wait(REOPEN_SECONDS):
            return None


def store_options(func: F) -> F:
    """``--store``, ``--token`` and ``--tenant``, each also read from an environment variable (``--store``
    and ``--token`` from the one `serve` reads them from)."""
    return store_option(token_option(tenant_option(func)))


@contextmanager
def reading_store(store_path: Path | str, token: str | None) -> Iterator[ReadableStore]:
    """The store opened for reading (the file, or the server holding it); closed afterwards.

    Read from the file while its request journal still holds exports (a receiver that stopped before
    committing them), the results miss those spans: a warning on stderr says so and how to store them.
    """
    store = open_store_for_read(store_path, token)
    if isinstance(store, TraceStore) and not is_lake_location(store_path):  # a lake's journals are its receivers'
        warn_of_unstored_journal(Path(store_path))
    try:
        yield as_tenant(store)
    finally:
        store.close()


def warn_of_unstored_journal(store_path: Path) -> None:
    """Say on stderr when the store's request journal holds exports the file does not have yet."""
    pending = unstored_journal_bytes(store_path)
    if pending:
        click.echo(
            f"warning: {journal_directory(store_path)} holds {pending:,} bytes of acknowledged exports that are "
            "not in the store yet (`tracegrade serve` stopped before committing them); these results miss "
            f"their spans until `tracegrade serve --store {store_path}` starts and stores them",
            err=True,
        )


# What stored text (span names, attributes, messages: whatever an exporter sent) may not do to the terminal that
# shows it: ESC starts the sequences that clear the screen, retitle the window, forge a hyperlink or rewrite
# earlier lines, and bidi overrides reorder what is shown. Each such character becomes one visible character (a
# C0 control its Unicode control picture, the others U+FFFD), so a styled rich Text keeps its offsets. Tabs and
# newlines stay; csv, json and files keep the text as stored.
_TERMINAL_SAFE = {code: 0x2400 + code for code in range(0x20) if code not in (0x09, 0x0A)}
_TERMINAL_SAFE[0x7F] = 0x2421
_TERMINAL_SAFE.update(dict.fromkeys(range(0x80, 0xA0), 0xFFFD))
_TERMINAL_SAFE.update(dict.fromkeys([*range(0x202A, 0x202F), *range(0x2066, 0x206A)], 0xFFFD))


def terminal_text(text: str) -> str:
    """``text`` with every character that could drive the terminal shown as a visible one (same length)."""
    return text.translate(_TERMINAL_SAFE)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with an ellipsis and the full length when it was longer."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text)} chars)"


def display(value: Any) -> str:
    """One cell as text for people: NULL empty, finite floats to 6 significant digits, the rest as
    :func:`cell_text`."""
    if value is None:
        return ""
    if isinstance(value, float) and math.isfinite(value):
        return f"{value:.6g}"
    return cell_text(value)


def cell_text(value: Any) -> str:
    """One cell that is not NULL as text, as DuckDB spells it where JSON has no word of its own: booleans ``true`` and
    ``false``, intervals ``1 day 02:03:04`` (:func:`~tracegrade.store.results.interval_text`); timestamps ISO 8601;
    floats in full (the shortest text that reads back the same); NaN and the infinities, BLOBs (base64), lists,
    arrays, structs and maps (JSON) as ``--format json`` writes them."""
    if isinstance(value, bool):  # before the numbers: a bool is an int
        return "true" if value else "false"
    if isinstance(value, datetime):
        return value.isoformat(sep=" ")
    if hasattr(value, "isoformat"):
        return str(value.isoformat())
    if isinstance(value, timedelta):
        return interval_text(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else non_finite_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return str(json_safe(value))
    if isinstance(value, (list, tuple, dict)):  # a fixed-size ARRAY comes as a tuple
        return json.dumps(json_safe(value), ensure_ascii=False)
    return str(value)


def row_count(rows: int) -> str:
    return f"{rows} row" if rows == 1 else f"{rows} rows"


class QueryTable:
    """A query result for the terminal: a table when its columns fit the width it is printed at, else one block
    per row with a line per column (too many columns for the width left a table of blank, folded cells)."""

    NARROWEST_CELL = 12  # below this (or a shorter header) a column's cells fold too much to read

    def __init__(self, result: QueryResult, *, max_width: int = 80) -> None:
        self.result = result
        self.max_width = max_width

    def fits(self, width: int) -> bool:
        """Whether every column gets at least its header or ``NARROWEST_CELL`` characters in ``width``."""
        needed = sum(min(len(column), self.NARROWEST_CELL) + 3 for column in self.result.columns) + 1
        return needed <= width

    def __rich_console__(self, console: Any, options: Any) -> Iterator[Any]:
        from rich.table import Table
        from rich.text import Text

        result = self.result
        cells = [[_table_cell(value, self.max_width) for value in row] for row in result.rows]
        if self.fits(options.max_width):
            table = Table(show_lines=False, header_style="bold", caption=row_count(len(result.rows)))
            for column in result.columns:
                table.add_column(column, overflow="fold")
            for row in cells:
                table.add_row(*row)
            yield table
            return
        for number, row in enumerate(cells, start=1):
            block = Table.grid(padding=(0, 1))
            block.add_column(style="bold", no_wrap=True)
            block.add_column(overflow="fold")
            for column, cell in zip(result.columns, row):
                block.add_row(column, cell)
            yield Text(f"-- row {number} --", style="dim")
            yield block
        yield Text(row_count(len(result.rows)), style="dim")


def _table_cell(value: Any, max_width: int) -> Any:
    """A cell of :class:`QueryTable`: NULL as a dim ``NULL``, as DuckDB's shell shows it, so that it differs from
    the empty string (an empty cell)."""
    from rich.text import Text

    if value is None:
        return Text("NULL", style="dim")
    return Text(terminal_text(clip(display(value), max_width)))


def render_table(result: QueryResult, *, max_width: int = 80) -> QueryTable:
    """The rows for the terminal (long cells clipped to ``max_width``): see :class:`QueryTable`."""
    return QueryTable(result, max_width=max_width)


def render_csv(result: QueryResult) -> str:
    """The rows as CSV, spelt as PostgreSQL's ``COPY ... (FORMAT csv)`` spells them so that NULL and the empty
    string differ: NULL is an empty field, unquoted; an empty string is ``""``; a field holding a comma, a quote
    or a line break is quoted, its quotes doubled. Cells as :func:`cell_text` (BLOBs base64, floats in full)."""
    lines = [_csv_line(result.columns)]
    lines += [_csv_line([None if value is None else cell_text(value) for value in row]) for row in result.rows]
    return "".join(lines)


def _csv_line(fields: Iterable[str | None]) -> str:
    return ",".join(_csv_field(field) for field in fields) + "\n"


def _csv_field(text: str | None) -> str:
    if text is None:
        return ""
    if text == "" or any(char in text for char in ',"\r\n'):
        return '"' + text.replace('"', '""') + '"'
    return text


def render_json(result: QueryResult) -> str:
    """ONE JSON array of row objects (JSON columns embedded as JSON, timestamps ISO 8601).

    A row object holds one value a name, so columns of the same name (``SELECT a.x, b.x``) would keep only the
    last: the later ones are renamed as DuckDB renames them in a table (``x_1``, ``x_2``), said on stderr."""
    columns = unique_columns(result.columns)
    if columns != result.columns:
        renamed = ", ".join(f"{new!r}" for old, new in zip(result.columns, columns) if old != new)
        click.echo(f"warning: column names repeat; in the JSON the later ones are {renamed}", err=True)
        result = QueryResult(columns, result.rows, result.types)
    return json.dumps(result.json_rows(), ensure_ascii=False, indent=2)


def unique_columns(columns: list[str]) -> list[str]:
    """``columns`` with each repeated name after its first given the first free suffix ``_1``, ``_2`` …"""
    taken = set(columns)
    seen: set[str] = set()
    unique = []
    for column in columns:
        name, number = column, 0
        while name in seen or (name != column and name in taken):
            number += 1
            name = f"{column}_{number}"
        seen.add(name)
        unique.append(name)
    return unique


def emit(renderable: Any, output: Path | None, *, inputs: Iterable[str | Path] = ()) -> None:
    """Print text or a rich renderable to stdout, or write it to ``output`` (never one of ``inputs``)."""
    from rich.console import Console

    if output is None:
        if isinstance(renderable, str):
            click.echo(renderable, nl=not renderable.endswith("\n"))
        else:
            Console(soft_wrap=False).print(renderable)
        return
    if isinstance(renderable, str):
        text = renderable
    else:
        buffer = io.StringIO()
        Console(file=buffer, width=200, no_color=True).print(renderable)
        text = buffer.getvalue()
    write_text_file(output, text if text.endswith("\n") else text + "\n", inputs=inputs)
