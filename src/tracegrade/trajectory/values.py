"""Small value helpers shared by the convention readers: issue collection, JSON and indexed-key parsing."""

from __future__ import annotations

import ast
import json
from typing import Any

__all__ = [
    "Issues",
    "as_args",
    "as_int",
    "as_text",
    "group_indexed",
    "index_families",
    "load_json",
    "parse_python_literal",
]


class Issues:
    """Ordered, de-duplicated list of what the mapper could not read (becomes ``mapping_issues``)."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: dict[str, None] = {}

    def add(self, message: str) -> None:
        self._seen.setdefault(message, None)

    def as_list(self) -> list[str]:
        return list(self._seen)


def load_json(value: str, *, expect_json: bool) -> tuple[Any, str | None]:
    """Parse ``value`` as JSON; returns ``(value, problem)``.

    Strings that start like an object or array are parsed; with ``expect_json`` any JSON text is
    (MLflow encodes plain strings as JSON). On failure the raw string comes back with a problem
    description ("truncated"/"not JSON"), never an exception.
    """
    text = value.strip()
    head = text[:1]
    if head in ("{", "[") or (expect_json and text):
        try:
            return json.loads(text), None
        except ValueError:
            if head in ("{", "["):
                return value, f"is not valid JSON (truncated? {len(value)} characters); kept the raw text"
            return value, "is not JSON; kept the raw text"
    return value, None


def parse_python_literal(text: str) -> Any:
    """Read a Python repr such as ``"{'city': 'Paris'}"`` (LangChain ``input_str``); the text itself if it isn't one."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[", "("):
        try:
            return ast.literal_eval(stripped)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return text
    return text


def as_text(value: Any) -> str | None:
    """A value as display text: strings unchanged, None stays None, anything else compact JSON."""
    if value is None or isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        return str(value)


def as_int(value: Any) -> int | None:
    """An integer attribute (ints may arrive as strings from some encoders); None when not a number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return None
    return None


def as_args(value: Any) -> dict[str, Any]:
    """Tool arguments as the object ``ToolCall.args`` needs.

    Objects pass through; an unreadable JSON text is kept under ``"_raw"``; any other bare value (a
    LangChain single-argument tool records only the value) is kept under ``"input"``.
    """
    if isinstance(value, dict):
        return value
    if value is None:
        return {}
    if isinstance(value, str) and value.lstrip()[:1] in ("{", "["):
        return {"_raw": value}
    return {"input": value}


def group_indexed(attributes: dict[str, Any], prefix: str) -> dict[int, dict[str, Any]] | None:
    """Reassemble flattened keys ``{prefix}{i}.{rest}`` into ``{i: {rest: value}}`` (None when there are none).

    Indexes are compared as numbers, so ``10`` sorts after ``9`` when the caller sorts the keys.
    """
    grouped: dict[int, dict[str, Any]] | None = None
    cut = len(prefix)
    for key, value in attributes.items():
        if not key.startswith(prefix):
            continue
        index, _, rest = key[cut:].partition(".")
        if not index.isdigit() or not rest:
            continue
        if grouped is None:
            grouped = {}
        grouped.setdefault(int(index), {})[rest] = value
    return grouped


# flattened list attributes: OpenInference messages/prompts/choices, legacy Traceloop prompts/completions
INDEXED_FAMILIES = (
    "llm.input_messages.",
    "llm.output_messages.",
    "llm.prompts.",
    "llm.choices.",
    "gen_ai.prompt.",
    "gen_ai.completion.",
)


def index_families(attributes: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """Every ``INDEXED_FAMILIES`` member present, reassembled like ``group_indexed``, in one pass."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    for key, value in attributes.items():
        if not key.startswith(INDEXED_FAMILIES):
            continue
        pieces = key.split(".", 3)  # every family is two dotted words: "llm.input_messages.3.message.role"
        if len(pieces) == 4 and pieces[2].isdigit():
            family = f"{pieces[0]}.{pieces[1]}."
            found.setdefault(family, {}).setdefault(int(pieces[2]), {})[pieces[3]] = value
    return found
