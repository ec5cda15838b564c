"""What a file handed to a command looks like: a report, an eval set, a config, an OTLP dump, something else.

Commands that take one kind of file use this to refuse another kind by name ("this is an eval set, not a
report") instead of loading it leniently into the wrong model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tracegrade.errors import did_you_mean
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet
from tracegrade.models.results import EvalReport

__all__ = ["KIND_NAMES", "document_kind", "file_kind"]

# kind -> how a message names it
KIND_NAMES = {
    "report": "an evaluation report",
    "evalset": "an eval set",
    "config": "an eval config",
    "otlp-traces": "an OTLP/JSON traces request",
    "otlp-logs": "an OTLP/JSON logs request",
    "otlp-metrics": "an OTLP/JSON metrics request",
    "otlp-json-lines": "OTLP/JSON lines (as the Collector's file exporter writes them)",
    "binary": "binary data (OTLP protobuf, perhaps)",
    "tokens": "a tokens file (serve --tokens)",
    "rules": "worker rules (worker and serve --worker-rules)",
}
# each kind is told by the keys only it has (a report shares eval_set_id and metadata with an eval set)
_REPORT_KEYS = frozenset(EvalReport.model_fields) - frozenset(EvalSet.model_fields)
_CONFIG_KEYS = frozenset(EvalConfig.model_fields) - frozenset(EvalSet.model_fields)
_OTLP_KEYS = {
    "otlp-traces": ("resourceSpans", "resource_spans"),
    "otlp-logs": ("resourceLogs", "resource_logs"),
    "otlp-metrics": ("resourceMetrics", "resource_metrics"),
}


def document_kind(data: Any) -> str | None:
    """The kind (a KIND_NAMES key) of one parsed JSON/YAML document, or None when it is none of them."""
    if not isinstance(data, dict):
        return None
    keys = set(data)
    if keys & _REPORT_KEYS:
        return "report"
    if "eval_cases" in keys or "eval_set_id" in keys:
        return "evalset"
    if keys & _CONFIG_KEYS:
        return "config"
    for kind, names in _OTLP_KEYS.items():
        if keys & set(names):
            return kind
    if "tenants" in keys:
        return "tokens"
    if "rules" in keys:
        return "rules"
    if any(did_you_mean(key, ["tenants"]) for key in keys):  # a misspelt 'tenants': tokens.py says what to write
        return "tokens"
    return None


def file_kind(path: Path) -> str | None:
    """The kind of a file that is not one JSON document: OTLP JSON lines, binary data, or None."""
    try:
        with path.open("rb") as handle:
            head = handle.read(65536)
    except OSError:
        return None
    if b"\0" in head or _not_text(head):
        return "binary"
    first_line = head.split(b"\n", 1)[0]
    try:
        first = json.loads(first_line)
    except (ValueError, RecursionError):  # a line nested too deeply for the parser is no OTLP record either
        return None
    return "otlp-json-lines" if (document_kind(first) or "").startswith("otlp-") else None


def _not_text(head: bytes) -> bool:
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 4  # a multi-byte character cut by the 64 KiB read is still text
    return False
