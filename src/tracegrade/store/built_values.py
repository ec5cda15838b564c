"""The gate's limit on values one function call builds: a call whose output is sized by an argument must have that
size written in the query, within a cap.

DuckDB checks for an interrupt only between chunks, and memory_limit does not count a function's output, so one
``repeat('x', 2000000000)`` or scalar ``range(30000000)`` runs past any time limit and takes gigabytes before it
can be stopped. ``BuiltValues`` refuses such a call (from its parse-tree node) before anything runs, unless every
size argument is an integer literal (maybe under a CAST or a unary minus), the arguments are given by position (not
``name := value``), and what the query's calls build, alone and together, is within ``MAX_BUILT_CHARS`` or
``MAX_BUILT_ITEMS``. Table functions in FROM (``FROM range(n)``) stream their rows and are not checked here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tracegrade.errors import QueryRefused

__all__ = ["BUILT_VALUE_FUNCTIONS", "MAX_BUILT_CHARS", "MAX_BUILT_ITEMS", "BuiltValues"]

# A chunk holds up to 2,048 rows and DuckDB looks for an interrupt only between chunks, so what one call builds is
# multiplied by 2,048 before a time limit can act: 100,000 bytes of text in UTF-8 (or of a blob, or bits) x 2,048 is
# 200 MB, and
# 10,000 list items (of up to 16 bytes and a validity bit) x 2,048 is about 330 MB.
MAX_BUILT_CHARS = 100_000
MAX_BUILT_ITEMS = 10_000

_STRING_ADVICE = "build a long string from rows instead, e.g. (SELECT string_agg('x', '') FROM range(n))"
_LIST_ADVICE = "use the table function in FROM, which streams its rows: SELECT range FROM range(n)"

Node = dict[str, Any]


class _NotWritten(QueryRefused):
    """A size argument that is not written in the query (``as_integer``: not as an integer literal);
    ``BuiltValues.check`` refuses the call with the rule it broke."""

    def __init__(self, what: str, *, as_integer: bool = False) -> None:
        super().__init__(what)
        self.what = f"{what} is not written in the query{' as an integer' if as_integer else ''}"


@dataclass(frozen=True)
class _Rule:
    """How to size one function's output from its arguments, against which cap, and what to do instead."""

    rule: str  # what must be written in the query, and what is measured, as said in a refusal
    cap: int
    unit: str  # what the size counts
    measure: Callable[[Sequence[Node]], int]
    advice: str


def _integer(node: Node | None, what: str) -> int:
    """The integer a literal argument writes (under any CASTs or a unary minus)."""
    if node is not None and node.get("class") == "CAST":
        return _integer(node.get("child"), what)
    if node is not None and node.get("function_name") == "-" and len(_arguments(node)) == 1:
        return -_integer(_arguments(node)[0], what)
    value = _literal(node)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise _NotWritten(what, as_integer=True)  # a column, a parameter, a date or time (a range of them)
    try:
        return int(value)  # a string only under a CAST: '5'::INT
    except ValueError:
        raise _NotWritten(what, as_integer=True) from None


def _literal(node: Node | None) -> Any:
    """The value a constant node holds (under any CASTs): a string or an integer, None for anything else."""
    while node is not None and node.get("class") == "CAST":
        node = node.get("child")
    if node is None or node.get("class") != "CONSTANT":
        return None
    if "literal" in node:  # DuckDB 2.x: the literal's kind and its text as written
        kind, text = node["literal"].get("kind"), node["literal"].get("text")
        return int(text) if kind == "INTEGER" else text if kind == "STRING" else None
    value = node["value"]
    return None if value.get("is_null") else value.get("value")


def _arguments(node: Node) -> list[Node]:
    """A call's arguments: DuckDB 1.x serializes them as ``children``, 2.x as ``arguments`` of named expressions."""
    if "arguments" in node:
        return [argument.get("expression") for argument in node["arguments"] or []]
    return list(node.get("children") or [])


def _names(node: Node) -> list[str]:
    """The names a call gives its arguments (``width := 20``; 1.x serializes them as the aliases of its children).
    DuckDB 2.x binds a named argument by its name, in any order, 1.x by its position: either way a size is not
    surely where its position says."""
    if "arguments" in node:
        return [str(argument["name"]) for argument in node["arguments"] or [] if argument.get("name")]
    return [str(child["alias"]) for child in node.get("children") or [] if child.get("alias")]


def _argument(arguments: Sequence[Node], position: int) -> Node | None:
    return arguments[position] if position < len(arguments) else None


def _sized(position: int, what: str) -> Callable[[Sequence[Node]], int]:
    """The size is one argument's value (1-based ``position``; a missing one, DuckDB's small default, counts 0)."""

    def measure(arguments: Sequence[Node]) -> int:
        if position > len(arguments):
            return 0
        return _integer(arguments[position - 1], what)

    return measure


def _repeat(arguments: Sequence[Node]) -> int:
    count = max(_integer(_argument(arguments, 1), "the count"), 0)
    value = _argument(arguments, 0)
    if value is not None and value.get("class") == "FUNCTION" and value.get("function_name") == "list_value":
        items = _arguments(value)
        texts = [_literal(item) for item in items]
        if any(text is None for text in texts):
            raise _NotWritten("an item of the repeated list")
        # an item weighs its text, but at least what the caps make one list item worth (ten characters)
        weight = MAX_BUILT_CHARS // MAX_BUILT_ITEMS
        return sum(max(_utf8_bytes(str(text)), weight) for text in texts) * count
    text = _literal(value)
    if not isinstance(text, str):
        raise _NotWritten("the repeated value")
    return _utf8_bytes(text) * count


def _utf8_bytes(text: str) -> int:
    """What DuckDB holds of ``text`` (UTF-8): an emoji weighs four of the cap, not one."""
    return len(text.encode("utf-8", "surrogatepass"))


def _padded(arguments: Sequence[Node]) -> int:
    """lpad/rpad build ``count`` characters of the string and the fill: bytes, at the widest character either
    holds (four, UTF-8's widest, when one is not written in the query; a space when the fill is left out)."""
    count = max(_integer(_argument(arguments, 1), "the count"), 0)
    texts = [_literal(_argument(arguments, 0)), _literal(_argument(arguments, 2)) if len(arguments) > 2 else " "]
    widest = max((_utf8_bytes(char) for text in texts if isinstance(text, str) for char in set(text)), default=1)
    return count * (widest if all(isinstance(text, str) for text in texts) else 4)


def _series(inclusive: bool) -> Callable[[Sequence[Node]], int]:
    """The length of the list scalar range (end excluded) or generate_series (end included) builds."""

    def measure(arguments: Sequence[Node]) -> int:
        bounds = [_integer(argument, "an argument") for argument in arguments]
        start, stop, step = (
            (0, bounds[0], 1) if len(bounds) == 1 else (*bounds[:2], bounds[2] if len(bounds) > 2 else 1)
        )
        if step == 0:
            return 0  # DuckDB refuses it itself
        length = (stop - start) // step + 1 if inclusive else -((start - stop) // step)  # integers: no rounding
        return max(length, 0)

    return measure


def _bit_range(arguments: Sequence[Node]) -> int:
    if len(arguments) < 3:
        raise _NotWritten("min or max (without them the bitstring spans the column's whole range)")
    return _integer(arguments[2], "max") - _integer(arguments[1], "min") + 1


# printf's directives (%[position$][flags][width][.precision]type) and format's replacement fields ({[id][:spec]}),
# the second group a nested field: a width or precision taken from an argument
_PRINTF_DIRECTIVE = re.compile(r"%%|%(?:\d+\$)?[-+ #0']*(\*|\d+)?(?:\.(\*|\d*))?")
_FORMAT_FIELD = re.compile(r"\{\{|\}\}|\{[^{}:]*(?::([^{}]*))?(\{)?")


def _format_widths(printf: bool) -> Callable[[Sequence[Node]], int]:
    """The largest width or precision a printf or format string writes."""

    def measure(arguments: Sequence[Node]) -> int:
        text = _literal(_argument(arguments, 0))
        if not isinstance(text, str):
            raise _NotWritten("the format")
        numbers: list[str] = []
        for match in (_PRINTF_DIRECTIVE if printf else _FORMAT_FIELD).finditer(text):
            fields = [field for field in match.groups() if field]
            if "*" in fields or (not printf and match.group(2)):
                raise _NotWritten("a width or precision taken from an argument (* or {})")
            numbers += fields if printf else re.findall(r"\d+", match.group(1) or "")
        widest = 1 if printf else max((_utf8_bytes(char) for char in set(text)), default=1)  # format's fill: any
        return max((int(number) for number in numbers), default=0) * widest

    return measure


_REPEAT = _Rule(
    "the value and the count written in the query, the value's length in UTF-8 times the count",
    MAX_BUILT_CHARS,
    "bytes",
    _repeat,
    _STRING_ADVICE,
)
_PAD = _Rule(
    "the count written in the query, times the widest character of the string and the fill in UTF-8",
    MAX_BUILT_CHARS,
    "bytes",
    _padded,
    _STRING_ADVICE,
)
_RESIZE = _Rule("the size written in the query", MAX_BUILT_ITEMS, "items", _sized(2, "the size"), _LIST_ADVICE)
_SERIES = "every argument an integer written in the query, the list's length"
_WIDTHS = "the format written in the query, with no * width or precision; its largest width or precision"
_FORMAT_ADVICE = "pad with lpad/rpad within the cap, or write the width as a number within it"
# Every function whose output is sized by an argument, under every name DuckDB 1.5 gives it (the parse tree writes
# names lower-case; a schema-qualified call, main.repeat, has the same name).
BUILT_VALUE_FUNCTIONS: dict[str, _Rule] = {
    "repeat": _REPEAT,
    "lpad": _PAD,
    "rpad": _PAD,
    "range": _Rule(_SERIES, MAX_BUILT_ITEMS, "items", _series(False), _LIST_ADVICE),
    "generate_series": _Rule(_SERIES, MAX_BUILT_ITEMS, "items", _series(True), _LIST_ADVICE),
    "list_resize": _RESIZE,
    "array_resize": _RESIZE,
    "printf": _Rule(_WIDTHS, MAX_BUILT_CHARS, "bytes", _format_widths(True), _FORMAT_ADVICE),
    "format": _Rule(
        f"{_WIDTHS}, times the widest character of the format in UTF-8",
        MAX_BUILT_CHARS,
        "bytes",
        _format_widths(False),
        _FORMAT_ADVICE,
    ),
    "bar": _Rule(
        "the width written in the query, times 3 (a bar's blocks take three bytes each in UTF-8)",
        MAX_BUILT_CHARS,
        "bytes",
        lambda arguments: 3 * _sized(4, "the width")(arguments),
        _FORMAT_ADVICE,
    ),
    "bitstring": _Rule(
        "the length written in the query", MAX_BUILT_CHARS, "bits", _sized(2, "the length"), _STRING_ADVICE
    ),
    "bitstring_agg": _Rule(
        "min and max written in the query, max - min + 1", MAX_BUILT_CHARS, "bits", _bit_range, "narrow min and max"
    ),
    "equi_width_bins": _Rule(
        "the bin count written in the query", MAX_BUILT_ITEMS, "items", _sized(3, "the bin count"), _LIST_ADVICE
    ),
}


class BuiltValues:
    """The values one query's calls build, refused past the caps: each call's, and all of them together under each
    cap (``repeat('x', 100000) || repeat('x', 100000) || …`` would otherwise add up to gigabytes in one row)."""

    def __init__(self, sql: str) -> None:
        self._sql = sql
        self._totals: dict[int, int] = {}  # by cap: the calls under one cap share it
        self._calls: dict[int, set[str]] = {}  # the functions called under each cap

    def check(self, node: Node) -> None:
        """Raise QueryRefused if this function-call node builds a value past its cap, alone or with the calls
        checked before it; a call of no function in ``BUILT_VALUE_FUNCTIONS`` passes."""
        name = str(node.get("function_name", "")).lower()
        rule = BUILT_VALUE_FUNCTIONS.get(name)
        if rule is None:
            return
        why = "one call builds its whole value before a time limit can stop it"
        limit = f"the rule: {rule.rule}, at most {rule.cap:,} {rule.unit}"
        named = _names(node)
        if named:
            raise QueryRefused(
                f"{self._refused(name, node)}: its arguments are named ({', '.join(f'{n} :=' for n in named)}), so "
                f"the size is not where its position says, and {why} ({limit}); write the arguments in order, "
                "without names"
            )
        try:
            size = rule.measure(_arguments(node))
        except _NotWritten as exc:
            raise QueryRefused(f"{self._refused(name, node)}: {exc.what}, and {why} ({limit}); {rule.advice}") from None
        if size > rule.cap:
            raise QueryRefused(
                f"{self._refused(name, node)}: it would build {size:,} {rule.unit}, and {why} ({limit}); {rule.advice}"
            )
        total = self._totals[rule.cap] = self._totals.get(rule.cap, 0) + max(size, 0)
        calls = self._calls.setdefault(rule.cap, set())
        calls.add(name)
        if total > rule.cap:
            raise QueryRefused(
                f"{self._refused(name, node)}: with the query's other calls of "
                f"{', '.join(f'{call}()' for call in sorted(calls))} it "
                f"would build {total:,} {rule.unit} in all, and {why}, as they add up in one row (at most "
                f"{rule.cap:,} in one query); {rule.advice}"
            )

    def _refused(self, name: str, node: Node) -> str:
        # only for a refusal: placing a call encodes the whole query, which may hold tens of thousands of calls
        return f"{name}() {_position(node, self._sql)} was refused"


def _position(node: Node, sql: str) -> str:
    """Where a node is in the query, as line and column (1-based)."""
    offset = node.get("query_location")
    encoded = sql.encode()  # DuckDB counts bytes of UTF-8
    if not isinstance(offset, int) or offset > len(encoded):
        return "in the query"
    before = encoded[:offset].decode(errors="ignore")
    line = before.count("\n") + 1
    column = len(before) - (before.rfind("\n") + 1) + 1
    return f"at line {line}, column {column} (character {len(before) + 1})"
