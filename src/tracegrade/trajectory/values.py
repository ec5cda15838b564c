"""Small value helpers shared by the convention readers: issue collection, JSON and indexed-key parsing."""

from __future__ import annotations

import ast
import json
import math
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
    "decode_json",
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


_UNREAD = object()  # not in a decode cache yet


class SharedWork:
    """Work shared by every span of one mapping: each distinct JSON text is decoded once (the few that cannot be
    are remembered apart), and a value derived from a text (the normalised messages of a conversation
    history, say) is computed once per text.

    Traces repeat attribute texts a lot (the same system instructions, LangGraph metadata and history on
    every span of a run); decoded values are shared between the spans that carry the same text, so
    nothing downstream may modify them in place. It also knows which attribute keys the spans carry.
    """

    __slots__ = ("_lists", "_loose", "_memos", "_problems", "_strict", "issues", "trace_keys")

    def __init__(self, issues: Issues) -> None:
        self.issues = issues
        self.trace_keys: frozenset[str] | None = None  # every attribute key of the spans (None: not known yet)
        self._strict: dict[str, Any] = {}
        self._loose: dict[str, Any] = {}
        self._problems: dict[tuple[str, bool], str] = {}  # only texts that could not be decoded as expected
        self._lists: dict[str, RecentLists] = {}
        self._memos: dict[str, dict[Any, Any]] = {}

    def decode(self, text: str, expect_json: bool) -> tuple[Any, str | None]:
        """``load_json(text, expect_json=...)``, once per distinct text."""
        cache = self._strict if expect_json else self._loose
        value = cache.get(text, _UNREAD)
        if value is _UNREAD:
            value, problem = load_json(text, expect_json=expect_json)
            cache[text] = value
            if problem:
                self._problems[text, expect_json] = problem
                return value, problem
        # a text that could not be decoded comes back as it is (no decoded value is the text itself)
        return value, (self._problems.get((text, expect_json)) if value is text else None)

    def may_carry(self, key: str) -> bool:
        """Can a span of this mapping carry attribute ``key``? (True while the keys are not known.)"""
        return self.trace_keys is None or key in self.trace_keys

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
            return decode_json(text), None
        except ValueError:
            if head in ("{", "["):
                return value, f"is not valid JSON (truncated? {len(value)} characters); kept the raw text"
            return value, "is not JSON; kept the raw text"
    return value, None


_COMMA = re.compile(r"[ \t\n\r]*,")  # JSON whitespace, then the comma before the next item
_SPACE = re.compile(r"[ \t\n\r]*")  # JSON whitespace (matches the empty string too)
# the C scanner ``json.loads`` runs, without its Python wrappers
_SCAN = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_JSON_SPACE = " \t\n\r"


def decode_json(text: str) -> Any:
    """``json.loads(text)`` for a str: the same value, or a ``ValueError`` where it raises one.

    Mappings decode a lot of small JSON texts; calling the scanner directly saves the Python-level
    wrappers around each one (``loads``, ``JSONDecoder.decode`` and ``raw_decode``).
    """
    start = _SPACE.match(text).end() if text[:1] in _JSON_SPACE else 0  # type: ignore[union-attr]
    try:
        value, end = _SCAN(text, start)
    except StopIteration:
        raise ValueError("not a JSON value") from None
    if end != len(text) and _SPACE.match(text, end).end() != len(text):  # type: ignore[union-attr]
        raise ValueError("extra data after the JSON value")
    return value


_RECENT = 4  # arrays remembered per kind
_HEAD = 32  # characters of an item compared before the whole overlap is


class RecentList:
    """One array ``convert_json_list`` decoded: its text, where its closing bracket is, its converted items and
    the offset where each item starts (-1 where unknown: an array decoded whole knows only its first)."""

    __slots__ = ("close", "items", "starts", "text")

    def __init__(self, text: str, items: list[Any], starts: list[int]) -> None:
        self.text = text
        self.close = len(text) - 1
        self.items = items
        self.starts = starts

    def overlap(self, text: str, pos: int) -> tuple[int, int] | None:
        """``(k, end)`` when ``text`` holds this array's items from the ``k``-th on, starting at ``pos`` and
        ending before ``end`` (what follows is to be checked by the caller); None when it does not."""
        known = self.text
        head = text[pos : pos + _HEAD]
        for k, start in enumerate(self.starts):
            if start >= 0 and known.startswith(head, start) and text.startswith(known[start : self.close], pos):
                return k, pos + self.close - start
        return None


class RecentLists:
    """The last few arrays ``convert_json_list`` decoded for one kind of value, newest first, and items converted
    elsewhere (``add_known``), reused where an array repeats them."""

    __slots__ = ("_known", "entries")

    def __init__(self) -> None:
        self.entries: list[RecentList] = []
        self._known: dict[str, list[tuple[str, Any]]] = {}  # the first characters -> (item text, converted)

    def add_known(self, text: str, item: Any) -> None:
        """Offer ``item``, the conversion of ``text`` (the text of one JSON value: an object or an array), to the
        arrays that repeat that text as one of their items. Texts shorter than ``_KNOWN_HEAD`` are not kept."""
        if len(text) >= _KNOWN_HEAD:
            self._known.setdefault(text[:_KNOWN_HEAD], []).append((text, item))

    def known_at(self, text: str, start: int) -> tuple[Any, int] | None:
        """``(converted item, end)`` when ``text`` holds a known item at ``start`` (decoding it would read exactly
        the item's text: an object or an array ends with its own closing bracket); None when it does not."""
        if self._known:
            for known, item in self._known.get(text[start : start + _KNOWN_HEAD], ()):
                if text.startswith(known, start):
                    return item, start + len(known)
        return None


_KNOWN_HEAD = 96  # characters that pick a known item's candidates (enough to tell model outputs apart)


def convert_json_list(text: str, recent: RecentLists, convert: Callable[[Any], Any]) -> list[Any] | None:
    """``[convert(item) for item in json.loads(text)]`` for a non-empty JSON array; None when ``text`` is
    anything else (not an array, empty, invalid: use ``load_json`` to find out what).

    A conversation history repeats the items of the model call before it: all of them and some more (a
    growing history), or all but the oldest and some more (a sliding window). When ``text`` starts with
    the items of an array in ``recent`` from one of its item boundaries to its end, those items are reused
    and only what follows is decoded and converted, except known items (``recent.add_known``). Converted items are
    shared between the arrays: never modify them.
    """
    text = text.strip()
    if text[:1] != "[":
        return None
    first = _SPACE.match(text, 1).end()  # type: ignore[union-attr]
    for entry in recent.entries:
        if text == entry.text:
            return entry.items
        found = entry.overlap(text, first)
        if found is None:
            continue
        k, end = found
        offset = first - entry.starts[k]
        starts = [start + offset if start >= 0 else -1 for start in entry.starts[k:]]
        if text[end:] == "]":  # the window shrank: nothing new
            return _remember(recent, RecentList(text, entry.items[k:], starts))
        comma = _COMMA.match(text, end)
        if comma is not None:
            added = _decode_items_from(text, comma.end(), convert, starts, recent)
            return None if added is None else _remember(recent, RecentList(text, entry.items[k:] + added, starts))
    try:
        value = decode_json(text)
    except ValueError:
        return None
    if not isinstance(value, list) or not value:
        return None
    return _remember(recent, RecentList(text, [convert(item) for item in value], [first] + [-1] * (len(value) - 1)))


def _decode_items_from(
    text: str, pos: int, convert: Callable[[Any], Any], starts: list[int], recent: RecentLists
) -> list[Any] | None:
    """The converted items of the array ``text`` from ``pos`` (after a comma) to its end (known items as they
    are), appending where each starts to ``starts``; None unless that is what ``json.loads`` would accept as
    the rest of an array."""
    items: list[Any] = []
    while True:
        start = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        known = recent.known_at(text, start)
        if known is not None:
            item, pos = known
        else:
            try:
                value, pos = _SCAN(text, start)
            except (StopIteration, ValueError):
                return None
            item = convert(value)
        starts.append(start)
        items.append(item)
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        separator = text[pos : pos + 1]
        if separator == "]":
            return items if pos + 1 == len(text) else None
        if separator != ",":
            return None
        pos += 1


def _remember(recent: RecentLists, entry: RecentList) -> list[Any]:
    recent.entries.insert(0, entry)
    del recent.entries[_RECENT:]
    return entry.items


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
    """An integer attribute (ints may arrive as strings from some encoders); None when not a number (NaN and the
    infinities included: OTLP's doubles carry them, and a reader that raised lost its span's other values too)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else None
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
    if not key.startswith(INDEXED_FAMILIES):
        return _NOT_INDEXED
    pieces = key.split(".", 3)  # every family is two dotted words: "llm.input_messages.3.message.role"
    if len(pieces) == 4 and pieces[2].isdigit():
        return f"{pieces[0]}.{pieces[1]}.", int(pieces[2]), pieces[3]
    return _NOT_INDEXED


def index_families(attributes: dict[str, Any]) -> dict[str, dict[int, dict[str, Any]]]:
    """Every ``INDEXED_FAMILIES`` member present, reassembled like ``group_indexed``, in one pass.

    What each attribute key is (indexed or not) is remembered for every trace: agents repeat their keys.
    """
    found: dict[str, dict[int, dict[str, Any]]] = {}
    known = _INDEXED_KEYS
    for key, value in attributes.items():
        parts = known.get(key)
        if parts is None:
            if len(known) >= _INDEXED_KEYS_MAX:
                known.clear()
            parts = known[key] = _indexed_key(key)
        if parts is not _NOT_INDEXED:
            family, index, rest = parts
            groups = found.get(family)
            if groups is None:
                groups = found[family] = {}
            fields = groups.get(index)
            if fields is None:
                fields = groups[index] = {}
            fields[rest] = value
    return found
