"""Loading and saving file-backed models with errors that name the file, the JSON path and the problem."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from tracegrade.errors import ConfigError, EvalSetError, FileFormatError, did_you_mean
from tracegrade.json_output import json_text
from tracegrade.models.file_text import Problem, read_json_file  # read_json_file re-exported: every loader's way in
from tracegrade.models.model_keys import known_keys
from tracegrade.output_files import write_text_file

__all__ = [
    "duplicate_id_problems",
    "json_path",
    "json_type_name",
    "load_model",
    "model_from_data",
    "not_an_object",
    "read_json_file",
    "read_model_file",
    "refuse_duplicate_ids",
    "repeated_names",
    "save_model",
    "validation_problems",
    "write_text_file",
]

M = TypeVar("M", bound=BaseModel)


def json_path(loc: tuple[Any, ...]) -> str:
    """Render a pydantic error location as a JSON path: ``$.eval_cases[0].conversation``."""
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


# error types whose message already says what was wrong with the value (no "(got ...)" after it)
_MESSAGE_SAYS_IT = frozenset(
    {"missing", "unknown_criterion_slot", "not_read", "switch_for_number", "control_character_in_id"}
)


def validation_problems(exc: ValidationError, model: Any = None) -> list[tuple[str, str]]:
    """One ``(json_path, message)`` pair per validation error, with a hint for unknown keys (the key meant,
    when ``model``, the type validated, has one close to it)."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            meant = did_you_mean(loc[-1], known_keys(model, loc[:-1])) if model is not None else ""
            msg = f"unknown key {loc[-1]!r}{meant or ' (remove it or check its spelling)'}"
        elif _too_large_for_a_float(err):
            msg = "too large for a number (at most about 1.8e308): write a smaller one"
        elif isinstance(err.get("input"), date):  # YAML reads an unquoted 2024-01-01 as a date, not text
            msg = f"{_JSON_TYPE_WORDS.get(err['type'], msg)} (got {err['input'].isoformat()}, a date to YAML: quote it)"
        elif "input" in err and err["type"] not in _MESSAGE_SAYS_IT:
            msg = _JSON_TYPE_WORDS.get(err["type"], msg)
            shown = repr(err["input"])
            msg = f"{msg} (got {shown[:80]}{'…' if len(shown) > 80 else ''})"
        problems.append((json_path(loc), msg))
    return problems


# pydantic's words for these name Python types and classes; a file's author thinks in JSON's
_JSON_TYPE_WORDS = {
    "dict_type": "must be an object",
    "model_type": "must be an object",
    "list_type": "must be a list",
    "string_type": "must be a string",
}


def _too_large_for_a_float(err: Any) -> bool:
    """pydantic's "Input should be a valid number" for an integer of hundreds of digits: it is a number, just one
    no float holds."""
    value = err.get("input")
    return err["type"] == "float_type" and isinstance(value, int) and not isinstance(value, bool)


def _error_class(model: type[BaseModel]) -> type[FileFormatError]:
    name = model.__name__
    if name == "EvalSet":
        return EvalSetError
    if name.endswith("Config"):
        return ConfigError
    return FileFormatError


def load_model(model: type[M], path: str | Path) -> M:
    """Validate a whole file into ``model``; on any problem nothing is returned and every problem is listed."""
    return model_from_data(model, read_model_file(model, path), path)


def read_model_file(model: type[BaseModel], path: str | Path) -> Any:
    """The parsed content of ``path``, a file of ``model``'s kind; a file that does not parse raises that
    kind's error (EvalSetError, ConfigError, FileFormatError)."""
    err_cls, kind = _error_class(model), _kind(model)
    try:
        return read_json_file(path, kind, strict=kind != "report")
    except FileFormatError as exc:  # undecodable: same error class as any other problem of this file kind
        raise _make(err_cls, path, exc.problems, kind) from None


def model_from_data(model: type[M], data: Any, path: str | Path) -> M:
    """``data``, parsed from file ``path``, validated into ``model``; every problem raises its kind's error."""
    err_cls, kind = _error_class(model), _kind(model)
    if not isinstance(data, dict):
        raise _make(err_cls, path, [("$", not_an_object(data))], kind)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _make(err_cls, path, validation_problems(exc, model), kind) from None


#: JSON's names for the values ``json`` parses a document into (a bool is checked before an int)
_JSON_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "a number"),
    (float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


def json_type_name(value: Any) -> str:
    """How JSON names ``value``'s type ("null", "a string", "an array"…), not Python ("NoneType", "str")."""
    if value is None:
        return "null"
    return next((name for kind, name in _JSON_TYPES if isinstance(value, kind)), type(value).__name__)


def not_an_object(data: Any) -> str:
    """The problem of a file whose top-level value is not the JSON object the file's kind is."""
    return f"expected a JSON object, got {json_type_name(data)}"


def _kind(model: type[BaseModel]) -> str:
    """How messages name a file of ``model``'s kind."""
    named = {"EvalSetError": "eval set", "ConfigError": "config"}.get(_error_class(model).__name__)
    return named or ("report" if model.__name__ == "EvalReport" else model.__name__)


def _make(
    err_cls: type[FileFormatError], path: str | Path, problems: list[tuple[str, str]], kind: str
) -> FileFormatError:
    if err_cls is FileFormatError:
        return FileFormatError(str(path), problems, kind)
    return err_cls(str(path), problems)  # type: ignore[call-arg]


def save_model(model: BaseModel, path: str | Path, *, inputs: Iterable[str | Path] = ()) -> None:
    """Write ``model`` as 2-space-indented JSON, atomically (a crash never leaves half a file); ``inputs`` are
    files ``path`` must not be (see :mod:`tracegrade.output_files`). Strict JSON, as the JSON reporter writes: a
    number that is not finite is ``null``, a lone surrogate U+FFFD."""
    write_text_file(path, json_text(model.model_dump(mode="json")) + "\n", inputs=inputs)


def duplicate_id_problems(
    eval_ids: list[str], items: str = "$.eval_cases", field: str = "eval_id"
) -> dict[int, list[Problem]]:
    """The problem of each case (by position) whose id an earlier case has, naming both positions: results are
    keyed by case id, so the later case's would overwrite the earlier one's. The one check of case ids, made by
    every eval-set loader and by every path that grades; ``items`` and ``field`` place the cases in their file
    (ADK's older lists name a case by ``name`` in ``$[i]``)."""
    return repeated_names(eval_ids, items, field, "case")


def refuse_duplicate_ids(eval_ids: list[str], source: str | Path) -> None:
    """Raise the :class:`EvalSetError` of ``source``, the file the cases are read from or written to, listing every
    case whose id an earlier case has (:func:`duplicate_id_problems`), when there is one."""
    repeats = duplicate_id_problems(eval_ids)
    if repeats:
        raise EvalSetError(str(source), [problem for found in repeats.values() for problem in found])


def repeated_names(names: list[str], items: str, field: str, noun: str) -> dict[int, list[Problem]]:
    """The problem of each item (by index) whose ``field`` repeats an earlier item's, naming both positions."""
    repeats: dict[int, list[Problem]] = {}
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if name in first:
            where = f"{items}[{i}].{field}"
            also = f"also used at {items}[{first[name]}]"
            repeats[i] = [(where, f"duplicate {field} {name!r} ({also}); every {noun} needs its own {field}")]
        first.setdefault(name, i)
    return repeats
