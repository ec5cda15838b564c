"""Small value helpers shared by the convention readers: issue collection, JSON and indexed-key parsing."""

from __future__ import annotations

import ast
import json
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
        self._lists: dict[str, ListItems] = {}
        self._memos: dict[str, dict[Any, Any]] = {}

    def decode(self, text: str, expect_json: bool) -> tuple[Any, str | None]:
        """``load_json(text, expect_json=...)``, once per distinct text."""
        cache = self._strict if expect_json else self._loose
        found = cache.get(text)
        if found is None:
            found = cache[text] = load_json(text, expect_json=expect_json)
        return found

    def list_items(self, kind: str) -> ListItems:
        """The items of JSON lists already converted one way (``kind``), for ``convert_json_list``."""
        items = self._lists.get(kind)
        if items is None:
            items = self._lists[kind] = ListItems()
        return items

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


_SCAN = json.JSONDecoder().scan_once  # one JSON value at an index -> (value, end index); what json.loads uses
_JSON_SPACE = " \t\n\r"
_ITEM_END = frozenset(",]" + _JSON_SPACE)
_HEAD = 64  # item texts are indexed by their first characters
_CANDIDATES = 4  # known item texts tried per head


class ListItems:
    """What ``convert_json_list`` remembers: converted items by their exact JSON text, and those texts by head."""

    __slots__ = ("by_head", "converted")

    def __init__(self) -> None:
        self.converted: dict[str, Any] = {}
        self.by_head: dict[str, list[str]] = {}


def convert_json_list(text: str, items: ListItems, convert: Callable[[Any], Any]) -> list[Any] | None:
    """``[convert(item) for item in json.loads(text)]`` for a non-empty JSON array, without decoding or
    converting an item text seen before (conversation histories repeat the earlier messages in every
    model call). None when ``text`` is anything else (not an array, empty, invalid): use ``load_json``.

    An item is recognised when a known item text starts at its position and a JSON delimiter follows;
    the text of a complete JSON value fixes its value, so this equals decoding the whole array.
    """
    text = text.strip()
    if text[:1] != "[":
        return None
    converted, by_head = items.converted, items.by_head
    end = len(text)
    out = []
    i = 1
    while True:
        while i < end and text[i] in _JSON_SPACE:
            i += 1
        if i >= end or text[i] == "]":
            return None  # empty array, or a trailing comma
        head = text[i : i + _HEAD]
        item = None
        for known in by_head.get(head, ()):
            j = i + len(known)
            if j < end and text[j] in _ITEM_END and text.startswith(known, i):
                item = known
                break
        if item is None:
            try:
                value, j = _SCAN(text, i)
            except (StopIteration, ValueError):
                return None
            item = text[i:j]
            converted[item] = convert(value)
            known_texts = by_head.setdefault(head, [])
            known_texts.insert(0, item)
            del known_texts[_CANDIDATES:]
        out.append(converted[item])
        while j < end and text[j] in _JSON_SPACE:
            j += 1
        if j >= end:
            return None
        if text[j] == "]":
            j += 1
            while j < end and text[j] in _JSON_SPACE:
                j += 1
            return out if j == end else None
        if text[j] != ",":
            return None
        i = j + 1


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
