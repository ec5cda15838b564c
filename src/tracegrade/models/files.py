"""Loading and saving file-backed models with errors that name the file, the JSON path and the problem."""

from __future__ import annotations

import difflib
import json
import os
import secrets
from pathlib import Path
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from tracegrade.errors import ConfigError, EvalSetError, FileFormatError
from tracegrade.models.file_text import read_json_file  # re-exported: every loader's way in

__all__ = ["json_path", "load_model", "read_json_file", "save_model", "validation_problems", "write_text_file"]

M = TypeVar("M", bound=BaseModel)


def json_path(loc: tuple[Any, ...]) -> str:
    """Render a pydantic error location as a JSON path: ``$.eval_cases[0].conversation``."""
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def validation_problems(exc: ValidationError, model: Any = None) -> list[tuple[str, str]]:
    """One ``(json_path, message)`` pair per validation error, with a hint for unknown keys: the key meant
    (or the keys accepted) where ``model``, the model validated, says which keys its objects take."""
    problems = []
    for err in exc.errors(include_url=False):
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = _unknown_key(str(loc[-1]), _keys_at(model, loc[:-1]) if model else [])
        elif "input" in err and err["type"] not in ("missing", "unknown_criterion_slot", "not_read"):
            msg = _JSON_TYPE_WORDS.get(err["type"], msg)
            shown = repr(err["input"])
            msg = f"{msg} (got {shown[:80]}{'…' if len(shown) > 80 else ''})"
        problems.append((json_path(loc), msg))
    return problems


# pydantic's words for these name Python types and classes; a file's author thinks in JSON's
_JSON_TYPE_WORDS = {"dict_type": "must be an object", "model_type": "must be an object", "list_type": "must be a list"}


def _unknown_key(key: str, accepted: list[str]) -> str:
    close = difflib.get_close_matches(key, accepted, n=1)
    if close:
        return f"unknown key {key!r}; did you mean {close[0]!r}?"
    if accepted:
        return f"unknown key {key!r}; this object takes {', '.join(accepted)}"
    return f"unknown key {key!r} (remove it or check its spelling)"


def _keys_at(model: Any, loc: tuple[Any, ...]) -> list[str]:
    """The keys the object at ``loc`` (a pydantic error location inside ``model``) accepts; [] when unknown.
    A model's keys are its fields, or what its ``accepted_keys()`` says (ADK's models add the keys they drop)."""
    annotation: Any = model
    for part in loc:
        annotation = _inner(annotation, part)
        if annotation is None:
            return []
    found = _model_in(annotation)
    if found is None:
        return []
    accepted = getattr(found, "accepted_keys", None)
    return list(accepted()) if callable(accepted) else list(found.model_fields)


def _inner(annotation: Any, part: Any) -> Any:
    """The annotation one step (a field name, a dict key or a list index) inside ``annotation``."""
    model = _model_in(annotation)
    if isinstance(part, str) and model is not None and part in model.model_fields:
        return model.model_fields[part].annotation
    for option in _options(annotation):
        origin, args = get_origin(option), get_args(option)
        if isinstance(part, str) and origin is dict and len(args) == 2:
            return args[1]
        if isinstance(part, int) and origin is list and args:
            return args[0]
        if isinstance(part, int) and origin is tuple and part < len(args):
            return args[part]
    return None


def _options(annotation: Any) -> tuple[Any, ...]:
    """The members of ``X | Y`` / ``Optional[X]``, or ``(annotation,)``."""
    return get_args(annotation) if get_origin(annotation) in (Union, UnionType) else (annotation,)


def _model_in(annotation: Any) -> type[BaseModel] | None:
    for option in _options(annotation):
        if isinstance(option, type) and issubclass(option, BaseModel):
            return option
    return None


def _error_class(model: type[BaseModel]) -> type[FileFormatError]:
    name = model.__name__
    if name == "EvalSet":
        return EvalSetError
    if name.endswith("Config"):
        return ConfigError
    return FileFormatError


def load_model(model: type[M], path: str | Path) -> M:
    """Validate a whole file into ``model``; on any problem nothing is returned and every problem is listed."""
    err_cls = _error_class(model)
    kind = {"EvalSetError": "eval set", "ConfigError": "config"}.get(
        err_cls.__name__, "report" if model.__name__ == "EvalReport" else model.__name__
    )
    try:
        data = read_json_file(path, kind, strict=kind != "report")
    except FileFormatError as exc:  # undecodable: same error class as any other problem of this file kind
        raise _make(err_cls, path, exc.problems, kind) from None
    if not isinstance(data, dict):
        raise _make(err_cls, path, [("$", f"expected a JSON object, got {type(data).__name__}")], kind)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _make(err_cls, path, validation_problems(exc), kind) from None


def _make(
    err_cls: type[FileFormatError], path: str | Path, problems: list[tuple[str, str]], kind: str
) -> FileFormatError:
    if err_cls is FileFormatError:
        return FileFormatError(str(path), problems, kind)
    return err_cls(str(path), problems)  # type: ignore[call-arg]


def write_text_file(path: str | Path, text: str) -> Path:
    """Write UTF-8 ``text`` atomically (parent directories created); returns the absolute path.

    The file gets the mode a plain ``open(path, "w")`` would give it: an existing file keeps its mode, a
    new one gets 0666 minus the umask (``tempfile.mkstemp`` would make it 0600, unreadable to a CI
    artifact step or a teammate).
    """
    target = Path(path).expanduser().absolute()
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = _create_sibling(target)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
        if target.exists():  # a new file already has its mode: the umask applied at creation
            os.chmod(tmp, target.stat().st_mode & 0o7777)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def _create_sibling(target: Path) -> tuple[int, Path]:
    """A new, uniquely named temporary file next to ``target``, opened for writing with mode 0666 & ~umask."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)
    while True:
        tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue


def save_model(model: BaseModel, path: str | Path) -> None:
    """Write ``model`` as 2-space-indented JSON, atomically (a crash never leaves half a file)."""
    text = json.dumps(model.model_dump(mode="json"), indent=2, ensure_ascii=False, default=str)
    write_text_file(path, text + "\n")
