"""The trajectory criterion's work per tool call: each call's name, arguments and details entry.

This runs for every call of every graded case, so each list is built in one comprehension or one
C-level ``map`` pass (not a Python loop with appends): the matcher then compares plain lists (names as
keys, arguments as dicts) instead of reading pydantic fields per comparison, and the details reuse what
was read. Calls whose arguments were not captured, or that raised, are rare; only then does a second pass
mark them.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter, itemgetter
from typing import Any

from tracegrade.models.dataset import ToolCall

__all__ = ["CallViews", "call_views"]

_NAME = itemgetter("name")
_ARGS = itemgetter("args")
_CAPTURED = attrgetter("args_captured")
_ERROR = attrgetter("error")


class CallViews:
    """A list of calls, read once: what the matcher compares and what the details list."""

    __slots__ = ("all_captured", "arguments", "details", "names")

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
    details = [{"name": c.name, "args": c.args, "call_id": c.call_id, "result": c.result} for c in calls]
    all_captured = all(map(_CAPTURED, calls))
    arguments: list[dict[str, Any] | None] = list(map(_ARGS, details))
    errors = list(map(_ERROR, calls))
    if not all_captured or errors.count(None) != len(errors):
        for index, call in enumerate(calls):
            if not call.args_captured:
                arguments[index] = None
                details[index]["args_captured"] = False
            if call.error is not None:
                details[index]["error"] = call.error
    return CallViews(list(map(_NAME, details)), arguments, details, all_captured)
