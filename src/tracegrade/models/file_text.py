"""A file's bytes as a JSON value, for every loader of eval sets, configs, reports, tokens files and worker rules:
the one place that refuses what the standard parsers let through or crash on (duplicate keys, nesting too deep for
the parser, YAML aliases that make a value contain itself or repeat it millions of times, NaN, infinity and numbers
too large for a double, a lone UTF-16 surrogate escape, an empty file, a symlink loop, a pipe or device, a file too
large to hold in memory) and accepts a UTF-8 byte-order mark, each as a :class:`FileFormatError` naming the file."""

from __future__ import annotations

import codecs
import errno
import json
import math
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

from tracegrade.errors import FileFormatError, MissingFileError, TracegradeError
from tracegrade.output_files import special_file_kind

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "MAX_REPORT_BYTES", "MAX_YAML_VALUES", "read_json_file"]

# The deepest nesting an eval set or config may have: far more than any needs, and shallow enough that code
# walking the value recursively (ADK's camelCase keys turned into snake_case...) stays within Python's limit.
MAX_DEPTH = 200
_LIBYAML_DEPTH = 1000  # libyaml's YAML_MAX_NESTING_LEVEL
_SHOWN_DEPTH = 6  # how deep the path of a too-deep value goes
_MIB = 1024 * 1024
# The largest file read: eval sets, configs, tokens files and worker rules are written or exported far smaller;
# reports (``grade --format json`` of 20,000 cases is about 800 MB) may be larger. A file is held in memory whole,
# parsed, several times its size, so the limit keeps a mistaken path (a disk image, a log) from exhausting memory.
MAX_FILE_BYTES = 256 * _MIB
MAX_REPORT_BYTES = 4096 * _MIB
# read at a time from a file larger than fstat said; /proc/sys refuses a read of 4 MiB or more (ENOMEM)
_CHUNK = _MIB
# The most values (scalars, lists and mappings) a YAML file's aliases may expand it to: each alias repeats its
# anchor's whole value, so nine nested levels of nine aliases ("billion laughs") stand for 10**9 values.
MAX_YAML_VALUES = 1_000_000
_NON_BLOCKING = getattr(os, "O_NONBLOCK", 0)  # opening a FIFO must not wait for a writer before it is refused

Problem = tuple[str, str]

# what a file of each kind holds, said when the file is empty
_EMPTY_HINTS = {
    "eval set": 'an eval set is an object with "eval_cases": [...]',
    "config": 'a config is an object with "criteria": {...}',
    "report": "a report is the JSON file `tracegrade grade --format json` writes",
    "input": 'an eval set is an object with "eval_cases": [...], a config one with "criteria": {...}',
    "tokens": "a tokens file has one key, 'tenants', mapping each tenant to its tokens: tenants: {acme: [token1]}",
    "file": 'an eval set is an object with "eval_cases": [...], a config one with "criteria": {...}, a tokens file '
    "one with 'tenants': {...}, worker rules one with 'rules': [...]",
}
_TOO_DEEP = "nested too deeply for the parser (about {limit} levels or more); no eval set, config or report needs this"


def read_json_file(path: str | Path, kind: str = "file", *, strict: bool = True, as_yaml: bool = False) -> Any:
    """The JSON value in ``path`` (YAML for ``.yaml``/``.yml``, or whatever its name with ``as_yaml``); every
    problem raises :class:`FileFormatError` of ``kind`` (or :class:`MissingFileError`), never a parser's own
    exception.

    ``strict`` (eval sets, configs, tokens files, worker rules) also refuses JSON keys given twice in one object
    and nesting deeper than :data:`MAX_DEPTH`, and reads at most :data:`MAX_FILE_BYTES`. Reports pass
    ``strict=False``: tracegrade writes them (``json.dumps`` repeats no key), pydantic validates them without
    recursing in Python, the checks make parsing a large one ~40% slower, and they may be as large as
    :data:`MAX_REPORT_BYTES`.
    """
    p = Path(path)
    try:
        text = _read_text(p, MAX_FILE_BYTES if strict else MAX_REPORT_BYTES)
        data, problems = (
            _parse_yaml(text, str(p)) if as_yaml or p.suffix.lower() in (".yaml", ".yml") else _parse_json(text, strict)
        )
    except FileNotFoundError:
        raise MissingFileError(f"{kind} file not found: {p}") from None
    except _Empty:
        hint = _EMPTY_HINTS.get(kind)
        raise FileFormatError(str(p), [("$", "the file is empty" + (f"; {hint}" if hint else ""))], kind) from None
    except _InvalidJson as exc:
        raise FileFormatError(str(p), [("$", f"{exc}{_not_json_hint(p)}")], kind) from None
    except _Invalid as exc:
        raise FileFormatError(str(p), [("$", str(exc))], kind) from None
    except RecursionError:
        raise FileFormatError(str(p), [("$", _TOO_DEEP.format(limit=sys.getrecursionlimit()))], kind) from None
    if strict and not problems:
        problems = _too_deep(data)
    if problems:
        raise FileFormatError(str(p), problems, kind)
    return data


def _read_text(p: Path, limit: int) -> str:
    """The text of file ``p``, refused (:class:`_Invalid`) before it is read when it is not a regular file (a
    FIFO would block, a device never end) or is larger than ``limit`` bytes."""
    try:
        fd = os.open(p, os.O_RDONLY | _NON_BLOCKING)
        try:
            info = os.fstat(fd)
            _check_readable(info, limit)
            with os.fdopen(fd, "rb", closefd=False) as handle:
                raw = _read_at_most(handle, info.st_size, limit)
        finally:
            os.close(fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise _Invalid(
            "a symlink loop: the link points back to itself through other links; point it at a real file"
            if exc.errno == errno.ELOOP
            else f"cannot read the file: {exc.strerror}"
        ) from None
    if len(raw) > limit:  # it grew after fstat, or tells no size (/proc): how much more is unknown, it was not read
        raise _Invalid(_too_large(None, limit))
    try:
        return raw.decode("utf-8-sig")  # a leading byte-order mark is dropped, as `tracegrade import` does
    except UnicodeDecodeError as exc:
        raise _Invalid(_not_utf8(raw, exc)) from None


def _read_at_most(handle: BinaryIO, size: int, limit: int) -> bytes:
    """The bytes of ``handle`` to its end, or its first ``limit + 1`` when it holds more.

    A read of n bytes allocates n bytes before it reads any, so reading at the limit would reserve 4 GiB for every
    report (a MemoryError where memory is not overcommitted). The first read is sized by ``size`` (what fstat
    said); a file that grew since, or that tells no size (``/proc``), is read on in chunks up to the limit.
    """
    parts: list[bytes] = []
    total = 0
    wanted = size + 1  # the whole file in one read; never 0, which would end a /proc file (size 0) at once
    while total <= limit:
        asked = min(wanted, limit + 1 - total)
        chunk = handle.read(asked)
        parts.append(chunk)
        total += len(chunk)
        if len(chunk) < asked:  # the end: a buffered read of a regular file returns less only there
            break
        wanted = _CHUNK
    return b"".join(parts)  # one part (the usual case): that part itself, not a copy


def _not_utf8(raw: bytes, exc: UnicodeDecodeError) -> str:
    """Where the bytes stop being UTF-8 (byte, line and column, as an editor counts them) and how to fix it;
    a UTF-16 file (Windows editors and PowerShell's ``>`` write it) is named as such."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return "UTF-16 text (it starts with a UTF-16 byte-order mark), not UTF-8: save the file as UTF-8"
    line = raw.count(b"\n", 0, exc.start) + 1
    column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
    return f"not UTF-8 text ({exc.reason} at byte {exc.start}) at line {line}, column {column}; save the file as UTF-8"


def _check_readable(info: os.stat_result, limit: int) -> None:
    """Refuse (:class:`_Invalid`) a file that is not a regular one, saying what it is, or larger than ``limit``."""
    what = special_file_kind(info.st_mode)
    if what is not None:
        raise _Invalid(
            f"{what}, not a regular file: tracegrade reads files it can read to the end; "
            "write the content to a file and pass that file"
        )
    if info.st_size > limit:
        raise _Invalid(_too_large(info.st_size, limit))


def _too_large(size: int | None, limit: int) -> str:
    """Why a file is not read: its ``size``, or (None) that it holds more than the limit, found while reading it up
    to one byte past the limit ("the file is 256.0 MiB, larger than the 256 MiB" would say nothing)."""
    what = (
        f"the file is {size / _MIB:,.1f} MiB, larger than the {limit // _MIB:,} MiB tracegrade reads"
        if size is not None
        else f"the file holds more than the {limit // _MIB:,} MiB tracegrade reads (it grew while it was read, "
        "or its size is not told in advance)"
    )
    return what + "; check that this is the file meant, or split it into smaller files"


class _Empty(TracegradeError):
    """The file holds no value at all."""


class _Invalid(TracegradeError):
    """The parser refused the text; the message says where."""


class _InvalidJson(_Invalid):
    """The text is not JSON (the file was read as JSON: its name does not end in .yaml or .yml)."""


def _not_json_hint(p: Path) -> str:
    """How to fix a file that is not JSON when its name says it is some other format (a ``.toml`` config)."""
    if p.suffix.lower() in ("", ".json"):
        return ""
    return (
        f"; a {p.suffix} file is read as JSON: tracegrade reads JSON, or YAML from a file named .yaml or .yml, so "
        "write the content in one of them"
    )


def _duplicate_problem(where: str, key: str, at: str = "") -> Problem:
    return (
        where,
        f"duplicate key {key!r}{at}: the later value would silently replace the earlier one; keep one of them",
    )


# ---- JSON ----


class _PairsRecorder:
    """``object_pairs_hook`` that builds each object as ``json`` would and notes any with a key given twice."""

    def __init__(self) -> None:
        # (object, its repeated keys); the object is held so that its id is not reused while parsing
        self.repeated: list[tuple[dict[str, Any], list[str]]] = []

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        obj = dict(pairs)
        if len(obj) != len(pairs):  # the common case costs one comparison
            seen: set[str] = set()
            repeated = []
            for key, _ in pairs:
                if key in seen:
                    repeated.append(key)
                seen.add(key)
            self.repeated.append((obj, repeated))
        return obj


def _decode_error_text(exc: json.JSONDecodeError) -> str:
    """What is wrong and where: ``json`` words some errors to be followed by the place ("Unterminated string
    starting at"), the others to be followed by " at" and the place."""
    where = f"line {exc.lineno}, column {exc.colno}"
    return f"{exc.msg} {where}" if exc.msg.endswith(" at") else f"{exc.msg} at {where}"


# a string token (skipped whole, so a "NaN" inside one is text), one of the constants Python's json accepts, or a
# number with a fraction or an exponent (what json hands to parse_float)
_STRING_OR_NON_FINITE = re.compile(r'"(?:[^"\\]|\\.)*"|(-?Infinity|NaN)|(-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)')
# a string token (skipped whole) or an integer of at least {} digits, read from the first digit of a run only
# ((?<!\d)): tried from each digit, a file of 4,300-digit numbers took 2.6 s per 100k characters (quadratic)
_LONG_INTEGER = r'"(?:[^"\\]|\\.)*"|(-?(?<!\d)\d{{{},}})'
# a \uD800-\uDFFF escape (half of a UTF-16 pair); may also match text after an escaped backslash: only a hint
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def _line_column(text: str, at: int) -> tuple[int, int]:
    """The line and column (both from 1) of offset ``at`` in ``text``."""
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


def _long_integer_text(text: str, exc: ValueError) -> str:
    """Where the integer is that has more digits than Python converts (``sys.get_int_max_str_digits``, 4,300 by
    default: a guard against quadratic conversion), and what to do; ``exc``'s own words if none is found."""
    get_limit = getattr(sys, "get_int_max_str_digits", None)  # Python 3.10.7 and later: older ones read any
    if get_limit is None:
        return str(exc)
    limit = get_limit()
    for found in re.finditer(_LONG_INTEGER.format(limit + 1), text):
        if found.group(1) is not None:
            line, column = _line_column(text, found.start(1))
            digits = len(found.group(1).lstrip("-"))
            return (
                f"an integer of {digits:,} digits at line {line}, column {column}, more than the {limit:,} Python "
                "reads; write it as a string"
            )
    return str(exc)


def _non_finite_problems(text: str) -> list[Problem]:
    """Where the text has ``NaN``, ``Infinity`` or ``-Infinity``, or a number too large for a double (``1e999``):
    Python's ``json`` reads them as floats, NaN or infinity, which JSON cannot hold (other tools refuse the file,
    and tracegrade's reports would write null) and a NaN threshold or score compares false with everything."""
    problems = []
    for found in _STRING_OR_NON_FINITE.finditer(text):
        constant, number = found.group(1), found.group(2)
        if constant is not None:
            line, column = _line_column(text, found.start(1))
            what = f"{constant} at line {line}, column {column} is not a JSON value (JSON has no NaN or infinity)"
        elif number is not None and not math.isfinite(float(number)):
            line, column = _line_column(text, found.start(2))
            what = f"{number} at line {line}, column {column} is too large for a number: it would read as infinity"
        else:
            continue
        problems.append(("$", f"{what}; write a number, or null where a value may be left out"))
    return problems


def _surrogate_problems(data: Any) -> list[Problem]:
    """Strings (keys too) holding a lone UTF-16 surrogate, which ``json`` reads from an escape like ``\\ud800``:
    half of a pair is no character, and the text could never be written back as UTF-8 (a report, ``convert``)."""
    problems = []
    stack: list[tuple[str, Any]] = [("$", data)]
    while stack:
        where, item = stack.pop()
        pairs = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, value in pairs:
            at = f"{where}[{key}]" if isinstance(item, list) else f"{where}.{key}"
            for text, which in ((key, "key"), (value, "value")):
                if isinstance(text, str) and _has_lone_surrogate(text):
                    code = next(ord(c) for c in text if 0xD800 <= ord(c) <= 0xDFFF)
                    problems.append(
                        (
                            at,
                            f"the {which} holds \\u{code:04x}, half of a UTF-16 surrogate pair, which is no "
                            "character: write the character itself, or both escapes of its pair",
                        )
                    )
            stack.append((at, value))
    return problems


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _parse_json(text: str, strict: bool) -> tuple[Any, list[Problem]]:
    if not text.strip():
        raise _Empty
    recorder = _PairsRecorder()
    non_finite: list[str] = []

    def note_constant(name: str) -> float:
        non_finite.append(name)
        return float(name)

    def note_float(number: str) -> float:
        value = float(number)
        if math.isinf(value):
            non_finite.append(number)
        return value

    hooks: dict[str, Any] = (
        {"object_pairs_hook": recorder, "parse_constant": note_constant, "parse_float": note_float} if strict else {}
    )
    try:
        data = json.loads(text, **hooks)
    except json.JSONDecodeError as exc:
        raise _InvalidJson(f"invalid JSON: {_decode_error_text(exc)}") from None
    except ValueError as exc:  # the one other refusal: an integer longer than Python converts
        raise _InvalidJson(f"invalid JSON: {_long_integer_text(text, exc)}") from None
    if non_finite:  # rare: the text is scanned again only to say where
        return data, _non_finite_problems(text)
    if strict and _SURROGATE_ESCAPE.search(text):  # rare: only then is every string looked at
        surrogates = _surrogate_problems(data)
        if surrogates:
            return data, surrogates
    if not recorder.repeated:
        return data, []
    paths = {id(obj): where for where, obj in _objects(data)}
    problems = []
    for obj, keys in recorder.repeated:
        # an object that was itself the earlier value of a repeated key is no longer in the tree: its parent's
        # repetition is reported instead
        if id(obj) in paths:
            problems += [_duplicate_problem(f"{paths[id(obj)]}.{key}", key) for key in keys]
    return data, problems


def _too_deep(value: Any) -> list[Problem]:
    """A problem when a value is nested more than :data:`MAX_DEPTH` levels deep, walked level by level without
    recursion (and without paths: this walk visits every object and array of every file)."""
    level = [value]
    for _ in range(MAX_DEPTH + 1):
        inner: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
            inner += [c for c in children if isinstance(c, (dict, list))]
        if not inner:
            return []
        level = inner
    return [(_deep_path(value), f"nested too deeply: a value under it is more than {MAX_DEPTH} levels deep")]


def _deep_path(value: Any) -> str:
    """The path, a few levels down, to the ancestor of the deepest value (the full path to it would be hundreds
    of indexes long)."""
    best, best_depth = "$", -1
    stack: list[tuple[int, str, Any]] = [(0, "$", value)]
    while stack:
        depth, where, item = stack.pop()
        if depth > best_depth:
            best, best_depth = where, depth
        children = item.items() if isinstance(item, dict) else enumerate(item) if isinstance(item, list) else ()
        for key, child in children:
            step = where if depth >= _SHOWN_DEPTH else f"{where}[{key}]" if isinstance(item, list) else f"{where}.{key}"
            stack.append((depth + 1, step, child))
    return best


def _objects(value: Any) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every object in ``value`` with its JSON path, without recursion (the value may nest deeply)."""
    stack: list[tuple[str, Any]] = [("$", value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            yield where, item
            stack += [(f"{where}.{k}", v) for k, v in item.items()]
        elif isinstance(item, list):
            stack += [(f"{where}[{i}]", v) for i, v in enumerate(item)]


# ---- YAML ----


def _parse_yaml(text: str, name: str) -> tuple[Any, list[Problem]]:
    import yaml

    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = None
    try:
        loader = loader_class(text)  # the pure-Python loader checks the characters here, libyaml's as it reads
        node = loader.get_single_node()  # composed first, so that repeated keys are found with their path
        if node is None:
            raise _Empty
        problems = _yaml_node_problems(node, loader)
        alias_problem = _alias_problem(node)
        if alias_problem is not None:  # not constructed: the value would contain itself, or be too large to walk
            return None, [*problems, alias_problem]
        return loader.construct_document(node), problems
    except yaml.YAMLError as exc:
        if "nesting depth" in str(getattr(exc, "problem", "")):  # libyaml's own limit, said as Python's is
            raise _Invalid(_TOO_DEEP.format(limit=_LIBYAML_DEPTH)) from None
        raise _Invalid(f"invalid YAML: {_yaml_error(exc, name)}") from None
    finally:
        if loader is not None:
            loader.dispose()


def _yaml_error(exc: Any, name: str) -> str:
    """PyYAML's complaint on one line, placed in file ``name`` (its own text names the file "<unicode string>",
    the text it was handed)."""
    mark = getattr(exc, "problem_mark", None)
    if mark is None:  # a character YAML does not allow (ReaderError), or a complaint without a place
        position = getattr(exc, "position", None)
        return str(exc).split("\n")[0] + (f" in {name} at character {position + 1}" if position is not None else "")
    text = f"{exc.problem} in {name}, {_yaml_place(mark)}"
    if exc.context:
        text += f" ({exc.context}" + (f" at {_yaml_place(exc.context_mark)})" if exc.context_mark else ")")
    return text + (f"; {exc.note}" if exc.note else "")


def _yaml_place(mark: Any) -> str:
    return f"line {mark.line + 1}, column {mark.column + 1}"


def _yaml_node_problems(root: Any, loader: Any) -> list[Problem]:
    """Keys given twice in one YAML mapping (a ``<<`` merge that a key then overrides is YAML's own feature), and
    floats that are not finite (``.nan``, ``.inf``, ``1.0e+400``): JSON, and so an eval set or config, has none."""
    import yaml

    problems: list[Problem] = []
    stack: list[tuple[str, Any]] = [("$", root)]
    visited: set[int] = set()  # aliases share nodes
    while stack:
        where, node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.MappingNode):
            seen: set[str] = set()
            for key_node, value_node in node.value:
                key = str(key_node.value)
                if key == "<<" or not isinstance(key_node, yaml.ScalarNode):
                    stack.append((where, value_node))
                    continue
                if key in seen:
                    mark = key_node.start_mark
                    at = f" (line {mark.line + 1}, column {mark.column + 1})"
                    problems.append(_duplicate_problem(f"{where}.{key}", key, at))
                seen.add(key)
                stack.append((f"{where}.{key}", value_node))
        elif isinstance(node, yaml.SequenceNode):
            stack += [(f"{where}[{i}]", item) for i, item in enumerate(node.value)]
        elif node.tag == "tag:yaml.org,2002:float" and not math.isfinite(loader.construct_yaml_float(node)):
            mark = node.start_mark
            problems.append(
                (
                    where,
                    f"{node.value} (line {mark.line + 1}, column {mark.column + 1}) is not a finite number (JSON has "
                    "no NaN or infinity, and a number beyond about 1.8e308 reads as infinity); write a number, or "
                    "null where a value may be left out",
                )
            )
    return problems


def _alias_problem(root: Any) -> Problem | None:
    """A problem when YAML aliases make a value contain itself, or expand the document beyond
    :data:`MAX_YAML_VALUES` values. Each node's expanded size is counted once (remembered by its id), so an alias
    bomb is measured in the time its text takes to read, never expanded."""
    import yaml

    sizes: dict[int, int] = {}  # id of a walked collection node -> how many values it expands to
    walking: list[tuple[Any, Iterator[tuple[str, Any]]]] = [(root, _yaml_children(root, "$"))]
    totals = [1]  # the values counted so far under each node being walked
    on_path = {id(root)}
    while walking:
        node, children = walking[-1]
        for where, child in children:
            if not isinstance(child, yaml.CollectionNode):
                totals[-1] += 1
            elif id(child) in sizes:
                totals[-1] += sizes[id(child)]
            elif id(child) in on_path:
                return where, _recursive_alias(child)
            else:
                walking.append((child, _yaml_children(child, where)))
                totals.append(1)
                on_path.add(id(child))
                break
        else:  # every child counted
            walking.pop()
            on_path.discard(id(node))
            sizes[id(node)] = size = totals.pop()
            if totals:
                totals[-1] += size
    if sizes[id(root)] <= MAX_YAML_VALUES:
        return None
    return (
        "$",
        f"its aliases expand it to {sizes[id(root)]:,} values, more than the {MAX_YAML_VALUES:,} tracegrade reads "
        "(each alias repeats its anchor's whole value); write the values out instead of repeating them through "
        "nested aliases",
    )


def _recursive_alias(anchored: Any) -> str:
    mark = anchored.start_mark
    return (
        f"a recursive alias: this alias refers to the anchor at line {mark.line + 1}, column {mark.column + 1}, "
        "whose value holds this alias, so the value would contain itself without end; remove the recursive alias "
        "or write the values out"
    )


def _yaml_children(node: Any, where: str) -> Iterator[tuple[str, Any]]:
    """The nodes directly in a YAML ``node`` (a mapping's keys and values), each with its JSON path."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            yield where, key_node
            merged = key_node.value == "<<" or not isinstance(key_node, yaml.ScalarNode)
            yield (where if merged else f"{where}.{key_node.value}"), value_node
    elif isinstance(node, yaml.SequenceNode):
        yield from ((f"{where}[{i}]", item) for i, item in enumerate(node.value))
