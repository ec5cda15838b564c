"""Encode OTLP protobuf messages as OTLP/JSON the way exporters do (hex ids), for decoder tests and bench.

protobuf's generic JSON mapping writes bytes fields as base64; OTLP/JSON wants trace and span ids as
hex, so those fields are rewritten after ``MessageToDict``.
"""

from __future__ import annotations

import base64
from typing import Any

from google.protobuf.json_format import MessageToDict

ID_FIELDS = {"traceId", "spanId", "parentSpanId"}


def otlp_json_dict(message: Any, *, enum_names: bool = False) -> dict[str, Any]:
    """The OTLP/JSON form of an Export*ServiceRequest as a dict (ids hex, int64 as strings)."""
    return _hex_ids(MessageToDict(message, use_integers_for_enums=not enum_names))


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        return {
            key: base64.b64decode(value).hex() if key in ID_FIELDS and isinstance(value, str) else _hex_ids(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_hex_ids(item) for item in node]
    return node
