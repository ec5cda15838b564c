"""OTLP/JSON AnyValue objects and KeyValue lists -> plain Python values, within DecodeLimits.

Follows the OTLP/JSON encoding: one of ``stringValue``, ``boolValue``, ``intValue`` (number or decimal
string), ``doubleValue`` (number, or ``"NaN"``/``"Infinity"``/``"-Infinity"``), ``bytesValue`` (base64,
standard or URL-safe, padding optional; kept as standard padded base64 text, the same as the protobuf
decoder produces), ``arrayValue {values}``, ``kvlistValue {values: [{key, value}]}``; ``{}`` -> None.
snake_case field names (``string_value``...) are accepted too. Unknown AnyValue fields decode to None
(forward compatibility). A value of the wrong JSON type raises ``Invalid`` naming the field path.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from tracegrade.ingest.decode.checks import WIDEST_INT_DIGITS, Invalid, WideInteger, quote, short_value, type_name
from tracegrade.ingest.decode.limits import TOO_DEEP, DecodeLimits, clip_text

__all__ = ["attributes_from_json", "json_int", "value_from_json"]

_STRING, _BOOL, _INT, _DOUBLE, _BYTES, _ARRAY, _KVLIST, _UNRESOLVABLE = range(8)
_ANY_KEYS = {
    "stringValue": _STRING,
    "boolValue": _BOOL,
    "intValue": _INT,
    "doubleValue": _DOUBLE,
    "bytesValue": _BYTES,
    "arrayValue": _ARRAY,
    "kvlistValue": _KVLIST,
    "stringValueStrindex": _UNRESOLVABLE,
    "string_value": _STRING,
    "bool_value": _BOOL,
    "int_value": _INT,
    "double_value": _DOUBLE,
    "bytes_value": _BYTES,
    "array_value": _ARRAY,
    "kvlist_value": _KVLIST,
    "string_value_strindex": _UNRESOLVABLE,
}
_SPECIAL_DOUBLES = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def json_int(value: Any, field: str, *, unsigned: bool = False, bits: int = 64) -> int:
    """An OTLP/JSON integer of the protobuf field's width (``bits``, signed or not): a JSON number or a decimal
    string. A value the field could not hold is refused, as a protobuf sender could not have sent it."""
    kind = type(value)
    number: int | None
    if kind is str:
        digits = value[1:] if value[:1] == "-" else value
        if not (digits.isascii() and digits.isdigit()):
            raise Invalid(f"{field} must be an integer (a number or a decimal string), got {quote(value)}")
        # wider than any field: left unconverted (Python refuses integer strings of thousands of digits)
        number = int(value) if len(digits) <= WIDEST_INT_DIGITS else None
    elif kind is int:
        number = value
    elif kind is float and value.is_integer():
        number = int(value)
    elif kind is WideInteger:
        number = None
    else:
        raise Invalid(f"{field} must be an integer (a number or a decimal string), got {type_name(value)}")
    low = 0 if unsigned else -(2 ** (bits - 1))
    high = 2**bits - 1 if unsigned else 2 ** (bits - 1) - 1
    if number is None or not low <= number <= high:
        width = f"a uint{bits}" if unsigned else f"an int{bits}"
        wide = number is None or abs(number) >= 10**WIDEST_INT_DIGITS
        shown = f"a number of more than {WIDEST_INT_DIGITS} digits" if wide else str(number)
        raise Invalid(f"{field} is out of range for {width} ({low} to {high}): {shown}")
    return number


def attributes_from_json(items: Any, field: str, limits: DecodeLimits) -> tuple[dict[str, Any], int]:
    """A JSON KeyValue list -> (attributes, number dropped by the count limit). ``field`` names it in errors."""
    if items is None:
        return {}, 0
    if type(items) is not list:
        raise Invalid(f"{field} must be an array of {{key, value}} objects, got {type_name(items)}")
    dropped = len(items) - limits.max_attributes_per_span
    if dropped > 0:
        items = items[: limits.max_attributes_per_span]
    quick = limits.quick_text_chars
    out: dict[str, Any] = {}
    for index, entry in enumerate(items):
        if type(entry) is not dict or type(key := entry.get("key", "")) is not str:
            raise Invalid(f"{field}[{index}] must be an object with a string 'key', got {_describe(entry)}")
        if len(key) > quick:
            key = clip_text(key, limits.max_attribute_value_bytes)
        value = entry.get("value")
        if type(value) is dict:
            text = value.get("stringValue")
            if type(text) is str:
                out[key] = text if len(text) <= quick else clip_text(text, limits.max_attribute_value_bytes)
                continue
        try:
            out[key] = _any(value, 1, limits)
        except Invalid as bad:
            raise Invalid(f"{field}[{index}].value{bad.reason}") from None
    return out, max(dropped, 0)


def value_from_json(value: Any, field: str, limits: DecodeLimits) -> Any:
    """One AnyValue object (for example a log record body) -> plain Python value."""
    try:
        return _any(value, 1, limits)
    except Invalid as bad:
        raise Invalid(f"{field}{bad.reason}") from None


def _describe(entry: Any) -> str:
    if type(entry) is dict:
        return f"key {type_name(entry.get('key', ''))}"
    return type_name(entry)


def _any(value: Any, depth: int, limits: DecodeLimits) -> Any:
    """Errors raised here carry a path suffix (``.intValue: ...``) for the caller to prefix."""
    if value is None:
        return None
    if type(value) is not dict:
        raise Invalid(f": an AnyValue must be an object, got {type_name(value)}")
    for key, inner in value.items():
        kind = _ANY_KEYS.get(key)
        if kind is not None:
            try:
                return _converted(kind, inner, depth, limits)
            except Invalid as bad:
                raise Invalid(f".{key}{bad.reason}") from None
    return None


def _converted(kind: int, inner: Any, depth: int, limits: DecodeLimits) -> Any:
    if inner is None:
        return None
    if kind == _STRING:
        if type(inner) is not str:
            raise Invalid(f": must be a string, got {type_name(inner)}")
        return clip_text(inner, limits.max_attribute_value_bytes)
    if kind == _INT:
        return json_int(inner, "")
    if kind == _BOOL:
        if type(inner) is bool:
            return inner
        if inner in ("true", "false"):
            return inner == "true"
        raise Invalid(f": must be true or false, got {short_value(inner)}")
    if kind == _DOUBLE:
        return _double(inner)
    if kind == _BYTES:
        return clip_text(_standard_base64(inner), limits.max_attribute_value_bytes)
    if kind == _ARRAY:
        return TOO_DEEP if depth > limits.max_nesting_depth else _array(inner, depth, limits)
    if kind == _KVLIST:
        return TOO_DEEP if depth > limits.max_nesting_depth else _kvlist(inner, depth, limits)
    return None  # _UNRESOLVABLE


def _double(inner: Any) -> float:
    kind = type(inner)
    if kind is float or kind is int:
        return float(inner)
    if kind is str:
        special = _SPECIAL_DOUBLES.get(inner)
        if special is not None:
            return special
        try:
            return float(inner)
        except ValueError:
            pass
    raise Invalid(f": must be a number or 'NaN'/'Infinity'/'-Infinity', got {short_value(inner)}")


def _standard_base64(inner: Any) -> str:
    if type(inner) is not str:
        raise Invalid(f": must be a base64 string, got {type_name(inner)}")
    try:
        raw = base64.b64decode(inner.replace("-", "+").replace("_", "/") + "=" * (-len(inner) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise Invalid(f": is not valid base64: {quote(inner)}") from None
    return base64.b64encode(raw).decode("ascii")


def _values_list(inner: Any, what: str) -> list:
    if type(inner) is not dict:
        raise Invalid(f": {what} must be an object with a 'values' array, got {type_name(inner)}")
    values = inner.get("values")
    if values is None:
        return []
    if type(values) is not list:
        raise Invalid(f".values: must be an array, got {type_name(values)}")
    return values


def _array(inner: Any, depth: int, limits: DecodeLimits) -> list:
    values = _values_list(inner, "arrayValue")
    extra = len(values) - limits.max_collection_items
    out = []
    for index, item in enumerate(values[: limits.max_collection_items] if extra > 0 else values):
        try:
            out.append(_any(item, depth + 1, limits))
        except Invalid as bad:
            raise Invalid(f".values[{index}]{bad.reason}") from None
    if extra > 0:
        out.append(f"<{extra} more items dropped>")
    return out


def _kvlist(inner: Any, depth: int, limits: DecodeLimits) -> dict:
    values = _values_list(inner, "kvlistValue")
    extra = len(values) - limits.max_collection_items
    out: dict[str, Any] = {}
    for index, entry in enumerate(values[: limits.max_collection_items] if extra > 0 else values):
        if type(entry) is not dict or type(key := entry.get("key", "")) is not str:
            raise Invalid(f".values[{index}]: must be an object with a string 'key', got {_describe(entry)}")
        try:
            out[clip_text(key, limits.max_attribute_value_bytes)] = _any(entry.get("value"), depth + 1, limits)
        except Invalid as bad:
            raise Invalid(f".values[{index}].value{bad.reason}") from None
    if extra > 0:
        out["<truncated>"] = f"<{extra} more items dropped>"
    return out
