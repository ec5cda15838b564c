"""The keys a place in a file-backed model may hold, for suggesting the one an unknown key was meant to be.

A pydantic error locates an unknown key (``extra_forbidden``) by its path, not by the model that refused it;
:func:`known_keys` walks the model's field types along that path (list items, dict values, optional and union
members) to the model at that place.
"""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel

__all__ = ["known_keys"]


def known_keys(model: Any, loc: Sequence[str | int]) -> list[str]:
    """The keys of the model found at ``loc`` inside ``model`` (a model, or a type holding models; empty when
    no model is found there): its field names, or what its ``accepted_keys()`` says (the ADK file models add the
    keys they accept and drop)."""
    places: list[Any] = [model]
    for part in loc:
        places = [step for place in places for member in _members(place) for step in _steps(member, part)]
    models = [member for place in places for member in _members(place) if _is_model(member)]
    return list(dict.fromkeys(name for found in models for name in _keys_of(found)))


def _keys_of(model: type[BaseModel]) -> list[str]:
    accepted = getattr(model, "accepted_keys", None)
    return list(accepted()) if callable(accepted) else list(model.model_fields)


def _members(annotation: Any) -> list[Any]:
    """The types a value of type ``annotation`` may have: each member of a union (``X | None``), else itself."""
    if get_origin(annotation) in (Union, types.UnionType):
        return [member for arg in get_args(annotation) for member in _members(arg)]
    return [annotation]


def _steps(annotation: Any, part: str | int) -> list[Any]:
    """The types that ``part`` of a location leads to from a value of type ``annotation`` (not a union)."""
    origin = get_origin(annotation)
    if _is_model(annotation):
        field = annotation.model_fields.get(part) if isinstance(part, str) else None
        return [field.annotation] if field is not None else []
    args = get_args(annotation)
    if origin is list and isinstance(part, int) and args:
        return [args[0]]
    if origin is dict and isinstance(part, str) and len(args) == 2:
        return [args[1]]
    if origin is tuple and isinstance(part, int) and part < len(args):
        return [args[part]]
    return []


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)
