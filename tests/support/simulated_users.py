"""A scripted simulated user on the local LLM server: user lines in order, a fixed goals verdict."""

from __future__ import annotations

from typing import Any

from tests.support.llm_server import ReceivedRequest, Reply, Responder

SIM_MARKER = "role-playing a user"  # in every simulated-user prompt
GOALS_MARKER = "which goals a user achieved"  # in every goals-judge prompt


def scripted_user(
    user_lines: list[str], goals_verdict: Reply, *, other_judges: Reply | None = None, **line_fields: Any
) -> Responder:
    """Answer simulated-user prompts with ``Reply(text=line, **line_fields)`` for ``user_lines`` in order, the
    goals judge with ``goals_verdict`` and any other prompt with ``other_judges`` (an error when it is None)."""
    lines = iter(user_lines)

    def respond(request: ReceivedRequest) -> Reply:
        if SIM_MARKER in request.prompt:
            return Reply(text=next(lines), **line_fields)
        if GOALS_MARKER in request.prompt:
            return goals_verdict
        if other_judges is None:
            raise AssertionError(f"unexpected judge prompt: {request.prompt[:200]}")
        return other_judges

    return respond
