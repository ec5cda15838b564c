"""SQL for a long text built from rows: the query gate refuses ``repeat('x', n)`` past ``MAX_BUILT_CHARS`` (one call
builds its whole value before a time limit can act), while a string_agg over ``FROM range(n)`` streams."""

from __future__ import annotations

__all__ = ["long_text_sql"]


def long_text_sql(characters: int, char: str = "x") -> str:
    """A scalar subquery whose value is ``char`` repeated ``characters`` times."""
    return f"(SELECT string_agg('{char}', '') FROM range({characters}))"
