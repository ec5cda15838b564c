"""The trajectory criterion's reading of tool calls: names and arguments for the matcher, entries for the details.

The matcher compares plain lists (names as keys, arguments as dicts) read once per call, instead of reading
pydantic fields per comparison. Details name the calls themselves; only the few calls that went unmatched get a
details entry of their own (:func:`call_entry`), which carries their position and reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracegrade.models.dataset import ToolCall

__all__ = ["CallViews", "call_entry", "call_views"]


class CallViews:
    """A list of calls, read once: what the matcher compares."""

    def __init__(self, names: list[str], arguments: list[dict[str, Any] | None], all_captured: bool) -> None:
        self.names = names
        self.arguments = arguments  # None: the call's arguments were not captured
        self.all_captured = all_captured  # every call's arguments were captured


def call_views(calls: Sequence[ToolCall]) -> CallViews:
    """The names and arguments of ``calls``."""
    names = [call.name for call in calls]
    captured = [call.args_captured for call in calls]
    arguments = [call.args if known else None for call, known in zip(calls, captured)]
    return CallViews(names, arguments, all(captured))


def call_entry(call: ToolCall) -> dict[str, Any]:
    """A call as a details entry: name, arguments, call id and result, and ``args_captured``/``error`` when they
    say something."""
    entry: dict[str, Any] = {"name": call.name, "args": call.args, "call_id": call.call_id, "result": call.result}
    if not call.args_captured:
        entry["args_captured"] = False
    if call.error is not None:
        entry["error"] = call.error
    return entry
