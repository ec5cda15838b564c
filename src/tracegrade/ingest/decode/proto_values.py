"""Protobuf AnyValue / KeyValue lists -> plain Python values, within DecodeLimits.

Value mapping (the same for OTLP/JSON, see ``json_values``): string -> str, bool -> bool, int -> int,
double -> float, bytes -> standard base64 text (so records stay JSON-serialisable), array -> list,
kvlist -> dict, unset -> None. ``string_value_strindex`` (a dictionary index used by profiles) cannot be
resolved without its dictionary and decodes to None.
"""

from __future__ import annotations

import base64
from typing import Any

from tracegrade.ingest.decode.limits import TOO_DEEP, DecodeLimits, clip_text

__all__ = ["attributes_from_proto", "value_from_proto"]


def attributes_from_proto(key_values: Any, limits: DecodeLimits) -> tuple[dict[str, Any], int]:
    """A repeated KeyValue field -> (attributes, number of entries dropped by the count limit)."""
    count = len(key_values)
    dropped = 0
    if count > limits.max_attributes_per_span:
        dropped = count - limits.max_attributes_per_span
        key_values = key_values[: limits.max_attributes_per_span]
    quick = limits.quick_text_chars
    out: dict[str, Any] = {}
    for kv in key_values:
        key = kv.key if len(kv.key) <= quick else clip_text(kv.key, limits.max_attribute_value_bytes)
        value = kv.value
        which = value.WhichOneof("value")
        if which == "string_value":
            text = value.string_value
            out[key] = text if len(text) <= quick else clip_text(text, limits.max_attribute_value_bytes)
        elif which is None:
            out[key] = None
        else:
            out[key] = _converted(value, which, 1, limits)
    return out, dropped


def value_from_proto(value: Any, limits: DecodeLimits) -> Any:
    """One AnyValue (for example a log record body) -> plain Python value."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    return _converted(value, which, 1, limits)


def _converted(value: Any, which: str, depth: int, limits: DecodeLimits) -> Any:
    if which == "string_value":
        return clip_text(value.string_value, limits.max_attribute_value_bytes)
    if which in ("int_value", "bool_value", "double_value"):
        return getattr(value, which)
    if which == "bytes_value":
        return clip_text(base64.b64encode(value.bytes_value).decode("ascii"), limits.max_attribute_value_bytes)
    if which == "array_value":
        if depth > limits.max_nesting_depth:
            return TOO_DEEP
        items = value.array_value.values
        extra = len(items) - limits.max_collection_items
        out = [_item(item, depth, limits) for item in (items[: limits.max_collection_items] if extra > 0 else items)]
        if extra > 0:
            out.append(f"<{extra} more items dropped>")
        return out
    if which == "kvlist_value":
        if depth > limits.max_nesting_depth:
            return TOO_DEEP
        entries = value.kvlist_value.values
        extra = len(entries) - limits.max_collection_items
        result = {
            clip_text(kv.key, limits.max_attribute_value_bytes): _item(kv.value, depth, limits)
            for kv in (entries[: limits.max_collection_items] if extra > 0 else entries)
        }
        if extra > 0:
            result["<truncated>"] = f"<{extra} more items dropped>"
        return result
    return None  # string_value_strindex or a variant newer than this decoder


def _item(value: Any, depth: int, limits: DecodeLimits) -> Any:
    which = value.WhichOneof("value")
    return None if which is None else _converted(value, which, depth + 1, limits)
