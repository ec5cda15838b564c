"""Plain and strict JSON of any value: the one conversion behind every JSON that tracegrade writes or prints.

Kept apart from the reporters (which import rich) so that saving a model (:func:`tracegrade.models.files.save_model`)
needs none of them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from enum import Enum
from typing import Any

from pydantic import BaseModel

from tracegrade.cycle_pause import no_cycle_collection
from tracegrade.output_files import well_formed_text

__all__ = ["json_text", "jsonable"]


def jsonable(value: Any, *, strict: bool = False) -> Any:
    """Turn models, enums, sets, bytes and unknown objects into plain JSON values (unknown -> ``str``).

    A number that is not finite (NaN, infinity) has no JSON form: it becomes the string ``"nan"``/``"inf"`` for
    text shown to people, and ``None`` (JSON ``null``) when ``strict``, for files that programs read: a report's
    schema gives such numbers as number or null, and the models read ``null`` back as NaN.
    """
    if isinstance(value, BaseModel):
        return jsonable(value.model_dump(warnings=False), strict=strict)
    if isinstance(value, Enum):
        return jsonable(value.value, strict=strict)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None if strict else str(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, strict=strict) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v, strict=strict) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return value.decode("utf-8", errors="replace")
    return str(value)


def json_text(value: Any, indent: int | None = 2) -> str:
    """Strict JSON text of any value, for output programs read (``--format json``): what :func:`jsonable` makes of it
    with ``strict``, lone surrogates as U+FFFD (see :func:`~tracegrade.output_files.well_formed_text`)."""
    with no_cycle_collection():  # the plain value holds no cycle, and beside a large heap collections are slow
        plain = jsonable(value, strict=True)
    return well_formed_text(json.dumps(plain, indent=indent, ensure_ascii=False))
