"""Validation and enum tables shared by the protobuf and OTLP/JSON decoders.

Checks return a reason string (or raise ``Invalid``) instead of building exceptions on the hot path;
the decoders turn a reason into a per-span ``Rejection``.
"""

from __future__ import annotations

import base64
import binascii
import functools
from collections.abc import Callable
from typing import NamedTuple, ParamSpec, TypeVar

from tracegrade.errors import DecodeError, TracegradeError

__all__ = [
    "KIND_BY_NAME",
    "KIND_BY_NUMBER",
    "MAX_INT32",
    "MAX_INT64",
    "STATUS_BY_NAME",
    "STATUS_BY_NUMBER",
    "WIDEST_INT_DIGITS",
    "Invalid",
    "WideInteger",
    "bad_id_bytes",
    "guarded",
    "hex_id",
    "log_times_problem",
    "quote",
    "short_value",
    "span_times_problem",
    "stored_count",
    "type_name",
]

P = ParamSpec("P")
R = TypeVar("R")

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1

KIND_BY_NUMBER = {0: "UNSPECIFIED", 1: "INTERNAL", 2: "SERVER", 3: "CLIENT", 4: "PRODUCER", 5: "CONSUMER"}
KIND_BY_NAME = {name: name for name in KIND_BY_NUMBER.values()} | {
    f"SPAN_KIND_{name}": name for name in KIND_BY_NUMBER.values()
}
STATUS_BY_NUMBER = {0: "UNSET", 1: "OK", 2: "ERROR"}
STATUS_BY_NAME = {name: name for name in STATUS_BY_NUMBER.values()} | {
    f"STATUS_CODE_{name}": name for name in STATUS_BY_NUMBER.values()
}


class Invalid(TracegradeError):
    """A part of one span or log record is malformed; ``reason`` names the field path inside it."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def stored_count(count: int) -> int:
    """A dropped-items count as the store keeps it: OTLP's counts are uint32, the store's columns 32-bit signed.

    A count past 2**31 - 1 says no more than "very many", so it is kept at that bound rather than costing the
    record (or, at the store, the whole request) its place."""
    return count if count <= MAX_INT32 else MAX_INT32


WIDEST_INT_DIGITS = 20  # the digits of 2**64 - 1, the widest protobuf integer


class WideInteger(NamedTuple):
    """An OTLP/JSON integer literal of more digits than any protobuf field holds, left unconverted (Python
    refuses to convert integer strings of thousands of digits, and no field could hold one anyway)."""

    digits: int


def type_name(value: object) -> str:
    """The JSON name of a parsed JSON value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, WideInteger):
        return f"a number of {value.digits} digits"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def quote(text: str, limit: int = 64) -> str:
    """``text`` in quotes for a message, shortened if long."""
    return repr(text if len(text) <= limit else text[:limit] + "…")


def short_value(value: object) -> str:
    """A string value quoted (and shortened), anything else by its JSON type name."""
    return quote(value) if isinstance(value, str) else type_name(value)


def bad_id_bytes(raw: bytes, field: str, size: int) -> str | None:
    """Why a protobuf id is invalid (wrong length or all zeros), or None if it is fine."""
    if len(raw) != size:
        return f"{field} must be {size} bytes, got {len(raw)}"
    if not raw.strip(b"\0"):
        return f"{field} is all zeros, which OTLP defines as invalid"
    return None


def _looks_base64(text: str, size: int) -> bool:
    if len(text) not in (-(-size * 4 // 3), 4 * -(-size // 3)):
        return False
    try:
        padded = text + "=" * (-len(text) % 4)
        decoded = base64.b64decode(padded.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(decoded) == size


def hex_id(text: object, field: str, size: int) -> str:
    """Validate an OTLP/JSON id (hex, any case) of ``size`` bytes and return it lower-case.

    Raises ``Invalid`` with a message that says what was expected and, for base64-looking ids,
    that OTLP/JSON uses hex.
    """
    chars = size * 2
    if type(text) is not str:
        raise Invalid(f"{field} must be a string of {chars} hex characters, got {type_name(text)}")
    if len(text) == chars:
        try:
            if len(bytes.fromhex(text)) == size:
                lowered = text.lower()
                if lowered.strip("0"):
                    return lowered
                raise Invalid(f"{field} is all zeros, which OTLP defines as invalid")
        except ValueError:
            pass
    if _looks_base64(text, size):
        raise Invalid(f"{field} must be {chars} hex characters (OTLP/JSON uses hex, not base64): got {quote(text)}")
    raise Invalid(f"{field} must be {chars} hex characters, got {len(text)}: {quote(text)}")


def span_times_problem(start: int, end: int) -> str | None:
    """Why a span's start/end times are unusable, or None if they are fine."""
    if not start:
        return "startTimeUnixNano is missing (0)"
    if not end:
        return "endTimeUnixNano is missing (0)"
    if end < start:
        return f"endTimeUnixNano ({end}) is before startTimeUnixNano ({start})"
    if end > MAX_INT64:
        return f"endTimeUnixNano ({end}) is beyond the year 2262 (larger than int64)"
    return None


def log_times_problem(time_ns: int, observed_ns: int) -> str | None:
    """Why a log record's times cannot be stored (beyond int64, as spans' end times), or None."""
    for field, value in (("timeUnixNano", time_ns), ("observedTimeUnixNano", observed_ns)):
        if value > MAX_INT64:
            return f"{field} ({value}) is beyond the year 2262 (larger than int64)"
    return None


def guarded(decoder: Callable[P, R]) -> Callable[P, R]:
    """Make a public decoder raise only DecodeError, whatever its input (a safety net for hostile bytes)."""

    @functools.wraps(decoder)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return decoder(*args, **kwargs)
        except DecodeError:
            raise
        except RecursionError:
            raise DecodeError("the request is nested too deeply to decode") from None
        except Exception as exc:
            raise DecodeError(
                f"internal decoder error ({type(exc).__name__}: {exc}); the request could not be decoded"
            ) from exc

    return wrapper
