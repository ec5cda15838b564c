"""PrivatePaths: the receiver's own directories, hidden from the errors its query clients read.

A query can fail on the server's disk: a spill whose temp directory (``<store>.tmp``) cannot be made or written
names that directory, an unreadable lake file names its Parquet path, an unreachable catalog its connection.
Those are the operator's to see, not a remote caller's: the caller reads each such path as the name of what it
is (``<store directory>``, ``<lake data>``, ...), and the whole error is logged. A path the caller wrote into
the query is not the server's and stays (unless it is one of these).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from tracegrade.errors import StoreError
from tracegrade.ingest.settings import ServeSettings
from tracegrade.store.lake_location import catalog_conninfo, redacted

__all__ = ["PrivatePaths"]

log = logging.getLogger(__name__)


class PrivatePaths:
    """Texts (paths, a catalog's connection string) replaced by a placeholder in query errors."""

    def __init__(self, named: dict[str, str]) -> None:
        # longest first, so a path inside another is replaced whole; "/" alone would cut every path apart
        self._named = sorted(((text, name) for text, name in named.items() if len(text) > 1), key=lambda p: -len(p[0]))

    @classmethod
    def of(cls, settings: ServeSettings) -> PrivatePaths:
        """The paths of a receiver started with ``settings``: its store's, journal's, lake data's and working
        directory."""
        named = {os.getcwd(): "<server directory>"}
        if settings.is_lake:
            for text in (str(settings.store), redacted(str(settings.store)), catalog_conninfo(str(settings.store))):
                named[text] = "<lake catalog>"
        else:
            named[str(Path(settings.store).absolute().parent)] = "<store directory>"
        if settings.lake_data is not None:
            named[str(settings.lake_data.absolute())] = "<lake data>"
        if settings.journal is not None:
            named[str(settings.journal.absolute())] = "<journal>"
        return cls(named)

    def hide(self, error: StoreError) -> None:
        """Rewrite ``error``'s message (in place, keeping its type) with every private text replaced."""
        message = str(error)
        hidden = message
        for text, name in self._named:
            hidden = hidden.replace(text, name)
        if hidden != message:
            log.warning("a query failed on the server's own files (its client reads them unnamed): %s", message)
            error.args = (hidden,)
