"""Small value helpers shared by the convention readers: issue collection, JSON and indexed-key parsing."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from typing import Any

__all__ = [
    "Issues",
    "SharedWork",
    "as_args",
    "as_int",
    "as_text",
    "convert_json_list",
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


class SharedWork:
    """Work shared by every span of one mapping: each distinct JSON text is decoded once, and a value derived
    from a text (the normalised messages of a conversation history, say) is computed once per text.

    Traces repeat attribute texts a lot (the same system instructions, LangGraph metadata and history on
    every span of a run); decoded values are shared between the spans that carry the same text, so
    nothing downstream may modify them in place.
    """

    __slots__ = ("_lists", "_loose", "_memos", "_strict", "issues")

    def __init__(self, issues: Issues) -> None:
        self.issues = issues
        self._strict: dict[str, tuple[Any, str | None]] = {}
        self._loose: dict[str, tuple[Any, str | None]] = {}
        self._lists: dict[str, RecentLists] = {}
        self._memos: dict[str, dict[Any, Any]] = {}

    def decode(self, text: str, expect_json: bool) -> tuple[Any, str | None]:
        """``load_json(text, expect_json=...)``, once per distinct text."""
        cache = self._strict if expect_json else self._loose
        found = cache.get(text)
        if found is None:
            found = cache[text] = load_json(text, expect_json=expect_json)
        return found

    def recent_lists(self, kind: str) -> RecentLists:
        """The JSON arrays last converted one way (``kind``), for ``convert_json_list``."""
        recent = self._lists.get(kind)
        if recent is None:
            recent = self._lists[kind] = RecentLists()
        return recent

    def memo(self, kind: str) -> dict[Any, Any]:
        """A memo of values derived one way (``kind``) from attribute values; callers fill it in."""
        memo = self._memos.get(kind)
        if memo is None:
            memo = self._memos[kind] = {}
        return memo


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


_COMMA = re.compile(r"[ \t\n\r]*,")  # JSON whitespace, then the comma before the next item
_RECENT = 4  # arrays remembered per kind


class RecentLists:
    """The last few JSON arrays ``convert_json_list`` decoded: text, text without the closing bracket, items."""

    __slots__ = ("entries",)

    def __init__(self) -> None:
        self.entries: list[tuple[str, str, list[Any]]] = []


def convert_json_list(text: str, recent: RecentLists, convert: Callable[[Any], Any]) -> list[Any] | None:
    """``[convert(item) for item in json.loads(text)]`` for a non-empty JSON array; None when ``text`` is
    anything else (not an array, empty, invalid: use ``load_json`` to find out what).

    A conversation history repeats the previous model call's history and adds to it: when ``text``
    extends an array in ``recent`` (same text up to its closing bracket, then a comma), only the added
    items are decoded and converted. Converted items are shared between the arrays: never modify them.
    """
    text = text.strip()
    if text[:1] != "[":
        return None
    for known, body, items in recent.entries:
        if text == known:
            return items
        if len(text) > len(known) and text.startswith(body):
            comma = _COMMA.match(text, len(body))
            if comma is not None:
                added = _decode_items("[" + text[comma.end() :], convert)
                return None if added is None else _remember(recent, text, items + added)
    found = _decode_items(text, convert)
    return None if found is None else _remember(recent, text, found)


def _decode_items(text: str, convert: Callable[[Any], Any]) -> list[Any] | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not value:
        return None
    return [convert(item) for item in value]


def _remember(recent: RecentLists, text: str, items: list[Any]) -> list[Any]:
    recent.entries.insert(0, (text, text[:-1], items))
    del recent.entries[_RECENT:]
    return items


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


_NOT_INDEXED = ("", 0, "")
_INDEXED_KEYS: dict[str, tuple[str, int, str]] = {}  # attribute key -> (family, index, rest), for every trace
_INDEXED_KEYS_MAX = 100_000


def _indexed_key(key: str) -> tuple[str, int, str]:
    pieces = key.split(".", 3)  # every family is two dotted words: "llm.input_messages.3.message.role"
    if len(pieces) == 4 and pieces[2].isdigit():
        return f"{pieces[0]}.{pieces[1]}.", int(pieces[2]), pieces[3]
    return _NOT_INDEXED


def index_families(attributes: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """Every ``INDEXED_FAMILIES`` member present, reassembled like ``group_indexed``, in one pass."""
    found: dict[str, dict[int, dict[str, Any]]] = {}
    known = _INDEXED_KEYS
    for key, value in attributes.items():
        if not key.startswith(INDEXED_FAMILIES):
            continue
        parts = known.get(key)
        if parts is None:
            if len(known) >= _INDEXED_KEYS_MAX:
                known.clear()
            parts = known[key] = _indexed_key(key)
        if parts is not _NOT_INDEXED:
            family, index, rest = parts
            found.setdefault(family, {}).setdefault(index, {})[rest] = value
    return found
