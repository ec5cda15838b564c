"""Lake store locations: ``ducklake:postgres:<libpq conninfo>`` strings, told apart from store files.

No DuckDB here: the CLI and the receiver's settings check a location before anything heavy is loaded.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["LAKE_PREFIX", "catalog_conninfo", "is_lake_location", "redacted"]

LAKE_PREFIX = "ducklake:postgres:"
# a password in a key=value conninfo (quoted or bare) or in a postgresql:// URI
_PASSWORD = re.compile(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)|(://[^:/@]*:)[^@]*(@)", re.IGNORECASE)
# a credential in a URL's query (``?key=…`` as Gemini's REST API takes it, ``&password=`` in a postgresql:// URI)
_QUERY_SECRET = re.compile(
    r"([?&](?:key|api[_-]?key|access[_-]?token|token|secret|client[_-]?secret|password|sig|signature)=)[^&#\s]*",
    re.IGNORECASE,
)


def is_lake_location(location: object) -> bool:
    """True for a DuckLake location (``ducklake:...``), False for a store file."""
    return isinstance(location, str) and location.startswith("ducklake:")


def catalog_conninfo(location: str) -> str:
    """The libpq conninfo of a ``ducklake:postgres:`` location; a ValueError says what is accepted."""
    if not location.startswith(LAKE_PREFIX) or not location[len(LAKE_PREFIX) :].strip():
        raise ValueError(
            f"{redacted(location)!r} is not a lake this tracegrade can open: write "
            f"'{LAKE_PREFIX}host=HOST port=5432 dbname=DB user=USER' (the catalog must be PostgreSQL)"
        )
    return location[len(LAKE_PREFIX) :].strip()


def redacted(location: str | Path) -> str:
    """The location (a conninfo, DSN or any URL) with any password hidden, for messages, logs and reports:
    ``password=…``, the password of ``scheme://user:password@host`` and a secret query parameter (``?key=…``)."""
    text = str(location)
    hidden = _PASSWORD.sub(lambda m: f"{m.group(1)}***" if m.group(1) else f"{m.group(3)}***{m.group(4)}", text)
    return _QUERY_SECRET.sub(r"\1***", hidden)
