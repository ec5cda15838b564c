"""Explain why a protobuf body failed to parse: walk its wire format and name the first bad spot.

Runs only after the protobuf runtime has refused a body, so it favours clear messages over speed.
It reports truncated fields, invalid wire types, invalid UTF-8 in string fields and excessive nesting,
each with the field path (OTLP/JSON names) and the byte offset.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor

from tracegrade.errors import TracegradeError

__all__ = ["explain_parse_failure"]

_MAX_DEPTH = 100  # the protobuf runtimes' default recursion limit


class _Found(TracegradeError):
    """The first problem found; long field paths are shortened to their start and end."""

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(_shortened(word) for word in message.split(" ")))


def _shortened(word: str, keep_head: int = 6, keep_tail: int = 3) -> str:
    parts = word.split(".")
    if len(parts) <= keep_head + keep_tail + 1:
        return word
    hidden = len(parts) - keep_head - keep_tail
    return ".".join([*parts[:keep_head], f"…({hidden} more)…", *parts[-keep_tail:]])


def explain_parse_failure(data: bytes, descriptor: Any, exc: BaseException) -> str:
    """A message for a body the protobuf runtime could not parse as ``descriptor``."""
    request = descriptor.name
    if not data:
        detail = "the body is empty"
    else:
        try:
            _walk(data, 0, len(data), descriptor, "", 0)
            detail = f"the protobuf runtime refused it ({exc})"
        except _Found as found:
            detail = found.args[0]
    hint = ""
    if data[:1] in (b"{", b"[") or data[:3] == b"\xef\xbb\xbf":
        # the same words for both protocols: OTLP/JSON exists only over HTTP
        hint = (
            "; the body looks like JSON: send OTLP/JSON over OTLP/HTTP with Content-Type: application/json "
            "(OTLP/gRPC carries protobuf only)"
        )
    return f"body is not a valid protobuf {request}: {detail}{hint}"


def _varint(data: bytes, pos: int, end: int, path: str) -> tuple[int, int]:
    result = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise _Found(f"truncated varint at byte offset {start}{_at(path)}")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift >= 70:
            raise _Found(f"malformed varint (more than 10 bytes) at byte offset {start}{_at(path)}")


def _at(path: str) -> str:
    return f" in {path}" if path else ""


def _walk(data: bytes, pos: int, end: int, descriptor: Any, path: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise _Found(f"messages are nested more than {_MAX_DEPTH} levels deep{_at(path)}")
    counts: dict[int, int] = {}
    while pos < end:
        tag_offset = pos
        tag, pos = _varint(data, pos, end, path)
        number, wire_type = tag >> 3, tag & 7
        field = descriptor.fields_by_number.get(number) if descriptor is not None else None
        if field is None:
            name = f"{path}.<field {number}>" if path else f"<field {number}>"
        else:
            name = f"{path}.{field.json_name}" if path else field.json_name
            if _is_repeated(field):
                index = counts.get(number, 0)
                counts[number] = index + 1
                name = f"{name}[{index}]"
        if number == 0:
            raise _Found(f"invalid field number 0 at byte offset {tag_offset}{_at(path)}")
        if wire_type == 0:
            _, pos = _varint(data, pos, end, name)
        elif wire_type in (1, 5):
            size = 8 if wire_type == 1 else 4
            if pos + size > end:
                raise _Found(f"{name}: truncated {size}-byte field at byte offset {tag_offset}")
            pos += size
        elif wire_type == 2:
            length, pos = _varint(data, pos, end, name)
            if pos + length > end:
                raise _Found(
                    f"{name}: field at byte offset {tag_offset} declares {length} bytes but only "
                    f"{end - pos} remain (the body is truncated or not protobuf)"
                )
            _check_payload(data, pos, pos + length, field, name, depth)
            pos += length
        else:
            raise _Found(f"invalid wire type {wire_type} at byte offset {tag_offset}{_at(path)}")


def _is_repeated(field: Any) -> bool:
    flag = getattr(field, "is_repeated", None)  # protobuf >= 5.28; older runtimes only have ``label``
    if flag is not None:
        return bool(flag)
    return field.label == FieldDescriptor.LABEL_REPEATED


def _check_payload(data: bytes, pos: int, end: int, field: Any, name: str, depth: int) -> None:
    if field is None:
        return
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        _walk(data, pos, end, field.message_type, name, depth + 1)
    elif field.type == FieldDescriptor.TYPE_STRING:
        try:
            data[pos:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise _Found(f"{name}: invalid UTF-8 at byte offset {pos + exc.start}") from None
