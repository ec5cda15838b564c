"""The DuckLake and PostgreSQL extensions, installed offline from their PyPI packages and loaded.

``pip install 'tracegrade[lake]'`` brings ``duckdb-extension-ducklake`` and ``duckdb-extension-postgres``,
each holding ``extensions/v<duckdb version>/<name>.duckdb_extension``. ``INSTALL '<that file>'`` copies it
into DuckDB's extension directory under the extension's own name (the postgres file installs as
``postgres_scanner``), so nothing is downloaded; the connection must have auto-install and auto-load off.
"""

from __future__ import annotations

from importlib import resources
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import duckdb

from tracegrade.errors import StoreError

__all__ = ["LAKE_EXTENSIONS", "LakeUnavailable", "extension_file", "load_lake_extensions", "require_psycopg"]

# (PyPI distribution's import name, file name in the package, name DuckDB loads it by)
LAKE_EXTENSIONS: tuple[tuple[str, str, str], ...] = (
    ("duckdb_extension_postgres", "postgres.duckdb_extension", "postgres_scanner"),
    ("duckdb_extension_ducklake", "ducklake.duckdb_extension", "ducklake"),
)
_INSTALL_HINT = "pip install 'tracegrade[lake]'"


class LakeUnavailable(StoreError):
    """The DuckLake extensions are not installed (or not for this DuckDB release)."""


def extension_file(package: str, file_name: str) -> Path:
    """The extension file inside ``package`` built for the running DuckDB; LakeUnavailable if absent."""
    if find_spec(package) is None:
        raise LakeUnavailable(
            f"a DuckLake store needs the Python package {package.replace('_', '-')}, which is not installed; "
            f"run: {_INSTALL_HINT}"
        )
    version = duckdb.__version__
    path = Path(str(resources.files(package) / "extensions" / f"v{version}" / file_name))
    if not path.is_file():
        raise LakeUnavailable(
            f"{package.replace('_', '-')} holds no {file_name} for DuckDB {version} ({path} is missing); install "
            f"the release built for this DuckDB: pip install '{package.replace('_', '-')}=={version}' "
            f"(or {_INSTALL_HINT})"
        )
    return path


def load_lake_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """Install (from the packages' files, offline) and load the postgres and ducklake extensions."""
    for package, file_name, name in LAKE_EXTENSIONS:
        path = extension_file(package, file_name)
        try:
            con.execute(f"INSTALL '{str(path).replace(chr(39), chr(39) * 2)}'")
            con.execute(f"LOAD {name}")
        except duckdb.Error as exc:
            raise LakeUnavailable(f"loading the {name} extension from {path} failed: {exc}; {_INSTALL_HINT}") from None


def require_psycopg() -> Any:
    """The psycopg module, which the queues kept in the catalog's PostgreSQL use; LakeUnavailable if absent."""
    try:
        import psycopg
    except ImportError:
        raise LakeUnavailable(
            f"a lake's build and grading job queues need the Python package psycopg, which is not installed; "
            f"run: {_INSTALL_HINT}"
        ) from None
    return psycopg
