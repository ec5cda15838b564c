"""The trajectory criterion's work per tool call: each call's name, arguments and details entry, read in one pass.

This runs for every call of every graded case: the matcher then compares plain lists (names as keys,
arguments as dicts) instead of reading pydantic fields per comparison, and the details reuse what was read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tracegrade.models.dataset import ToolCall

__all__ = ["CallViews", "call_views"]


class CallViews:
    """A list of calls, read once: what the matcher compares and what the details list."""

    def __init__(
        self,
        names: list[str],
        arguments: list[dict[str, Any] | None],
        details: list[dict[str, Any]],
        all_captured: bool,
    ) -> None:
        self.names = names
        self.arguments = arguments  # None: the call's arguments were not captured
        # each call for result details (cheaper than ``model_dump``): name, arguments, call id and result, and
        # ``args_captured``/``error`` when they say something
        self.details = details
        self.all_captured = all_captured  # every call's arguments were captured


def call_views(calls: Sequence[ToolCall]) -> CallViews:
    """The names, arguments and details entries of ``calls``."""
    names: list[str] = []
    arguments: list[dict[str, Any] | None] = []
    details: list[dict[str, Any]] = []
    all_captured = True
    for call in calls:
        name, args, captured, error = call.name, call.args, call.args_captured, call.error
        names.append(name)
        arguments.append(args if captured else None)
        entry: dict[str, Any] = {"name": name, "args": args, "call_id": call.call_id, "result": call.result}
        if not captured:
            entry["args_captured"] = False
            all_captured = False
        if error is not None:
            entry["error"] = error
        details.append(entry)
    return CallViews(names, arguments, details, all_captured)
