"""Parsing ``--since`` values: kept for its importers; the parser is :mod:`tracegrade.timespec`."""

from __future__ import annotations

from tracegrade.timespec import parse_since, utc_now

__all__ = ["parse_since", "utc_now"]
