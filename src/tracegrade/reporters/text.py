"""Text helpers shared by the reporters: sanitising untrusted text, shortening, JSON and number formats."""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Mapping
from typing import Any

from tracegrade.json_output import json_text, jsonable  # re-exported: the reporters' way in

__all__ = [
    "clean_text",
    "escaped_json_text",
    "format_cost",
    "format_duration",
    "format_score",
    "format_timestamp",
    "format_usage",
    "json_text",
    "jsonable",
    "message_text",
    "one_line",
    "shorten",
    "to_json_text",
]

# Characters that are unsafe to emit raw: C0 controls except tab and newline, a lone carriage return,
# DEL, C1 controls, lone surrogates, the two non-characters XML 1.0 forbids (U+FFFE, U+FFFF), and the bidi
# embeddings, overrides and isolates (U+202A-U+202E, U+2066-U+2069): a case name holding U+202E would
# reverse the rest of its line on a terminal or a page, so that "FAIL" or a score reads as something else.
# Right-to-left text itself needs none of them; the marks U+200E/U+200F, which override nothing, stay.
_UNSAFE_CHARS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff\u202a-\u202e\u2066-\u2069]")


def _visible_escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def clean_text(value: object) -> str:
    """``str(value)`` made safe for terminals, HTML and XML 1.0.

    Line endings are normalised to ``\\n``; every other control character (and anything XML 1.0 forbids, and
    the bidi overrides) becomes a visible escape such as ``\\x1b`` or ``\\u202e``, so nothing is silently lost
    and nothing raw gets through.
    """
    text = value if isinstance(value, str) else str(value)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    return _UNSAFE_CHARS.sub(_visible_escape, text)


def escaped_json_text(value: Any) -> str:
    """:func:`json_text` on one line, with every character :func:`clean_text` would make visible written as a JSON
    ``\\uXXXX`` escape instead: JSON that a strict parser reads back as the very value, and that XML 1.0, a page
    and a terminal hold as it is (``clean_text``'s ``\\x85`` inside a JSON string is no JSON escape)."""
    # JSON text holds such a character only inside a string (json_text escapes C0 and replaces lone surrogates)
    return _UNSAFE_CHARS.sub(_json_escape, json_text(value, indent=None))


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def one_line(value: object) -> str:
    """:func:`clean_text` of ``str(value)`` with its line breaks shown as ``\\n`` and ``\\r`` too, as pytest
    shows them in a test id: for a name or an id (a case id holding a newline) within a line of text."""
    text = value if isinstance(value, str) else str(value)
    return clean_text(text.replace("\r", "\\r").replace("\n", "\\n"))


def shorten(text: str, limit: int | None) -> str:
    """Cut ``text`` to ``limit`` characters, saying how much was left out (``None`` means no limit)."""
    if limit is None or len(text) <= limit:
        return text
    return f"{text[:limit]}… [{len(text) - limit:,} more characters]"


def to_json_text(value: Any, indent: int | None = None) -> str:
    """JSON text of any value (strings stay strings, not re-quoted JSON); never raises."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(jsonable(value), indent=indent, ensure_ascii=False)
    except (ValueError, RecursionError):
        return repr(value)


def message_text(content: Any) -> str:
    """The readable text of a message ``content``: a string, or the text parts of a list-shaped content."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        for key in ("text", "content"):
            if isinstance(content.get(key), str):
                return content[key]
        return to_json_text(content)
    if isinstance(content, (list, tuple)):
        return "\n".join(part for part in (message_text(p) for p in content) if part)
    return to_json_text(content)


def format_timestamp(ts: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    """A Unix timestamp in local time (``"?"`` when it is not a usable number)."""
    try:
        return time.strftime(fmt, time.localtime(float(ts)))
    except (TypeError, ValueError, OverflowError, OSError):
        return "?"


def format_duration(seconds: float) -> str:
    """``0.123s``, ``12.35s``, ``2m 05.0s``; ``?`` for a duration that is no number (a NaN or an infinity read
    back from a saved report)."""
    if not math.isfinite(seconds):
        return "?"
    if seconds >= 60:
        minutes, rest = divmod(seconds, 60)
        return f"{int(minutes)}m {rest:04.1f}s"
    return f"{seconds:.3f}s" if seconds < 1 else f"{seconds:.2f}s"


def format_score(score: float | None) -> str:
    """A score to two decimals, ``-`` when there is none, ``n/a`` when it is no number (a custom criterion's NaN,
    read back from a saved report as ``null``): as a sample spread that is none is shown."""
    if score is None:
        return "-"
    return f"{score:.2f}" if math.isfinite(score) else "n/a"


def format_cost(usd: float) -> str:
    """Dollar cost with enough decimals for judge-sized amounts: ``$0.0012``, ``$1.25``."""
    if usd == 0:
        return "$0"
    return f"${usd:.2f}" if usd >= 1 else f"${usd:.4f}" if usd >= 0.0001 else f"${usd:.6f}"


def format_usage(usage: Any) -> str:
    """One line for a TokenUsage: totals, in/out split, cache reads and writes, calls and cost when known."""
    total = getattr(usage, "total_tokens", 0)
    parts = [f"{total:,} tokens (in {usage.input_tokens:,} / out {usage.output_tokens:,})"]
    if usage.cache_read_tokens:
        parts.append(f"cache read {usage.cache_read_tokens:,}")
    if usage.cache_creation_tokens:
        parts.append(f"cache write {usage.cache_creation_tokens:,}")
    if usage.calls:
        parts.append(f"{usage.calls:,} call{'s' if usage.calls != 1 else ''}")
    if usage.cost_usd:
        parts.append(format_cost(usage.cost_usd))
    return ", ".join(parts)
