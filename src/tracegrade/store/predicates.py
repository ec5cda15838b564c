"""SQL predicates users write (``--where``, a selector's ``where``, a worker rule's ``where``), spliced into
tracegrade's own queries beside its other conditions.

A predicate is put in parentheses of its own, and it must be one self-contained expression: one that closes a
parenthesis it did not open (``true) OR (true``) would escape them and cancel the conditions around it (a time
window, a status, a sample), silently selecting more than asked. Parentheses are counted over DuckDB's own
tokens, so those inside strings, quoted names and comments do not count.
"""

from __future__ import annotations

import duckdb

from tracegrade.errors import InvalidValueError

__all__ = ["isolated_predicate", "unbalanced_parenthesis"]


def unbalanced_parenthesis(predicate: str) -> str | None:
    """Why ``predicate`` is not self-contained (a parenthesis closed before it was opened, or left open), or None."""
    depth = 0
    encoded = predicate.encode()  # the tokens' offsets count UTF-8 bytes
    for start, kind in duckdb.tokenize(predicate):
        if kind != duckdb.token_type.operator:
            continue
        mark = encoded[start : start + 1]
        depth += (mark == b"(") - (mark == b")")
        if depth < 0:
            column = len(encoded[:start].decode()) + 1
            return f"closes a parenthesis it did not open (at character {column})"
    if depth > 0:
        return f"leaves {depth} parenthesis{'es' if depth > 1 else ''} open"
    return None


def isolated_predicate(predicate: str, name: str = "--where") -> str:
    """``predicate`` in parentheses of its own, on lines of its own (a trailing ``--`` comment ends with its
    line); InvalidValueError, naming the predicate as ``name``, if it is not self-contained."""
    problem = unbalanced_parenthesis(predicate)
    if problem:
        raise InvalidValueError(
            f"{name} {predicate!r} {problem}: write one condition, with its parentheses matched, such as "
            "\"status = 'ERROR' AND (duration_ms > 1000 OR span_count > 50)\""
        )
    return f"(\n{predicate}\n)"
