"""Helpers shared by CLI commands: turning tracegrade errors into clean messages and exit codes."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import click

from tracegrade.errors import TracegradeError

__all__ = ["UsageProblem", "friendly_errors"]

F = TypeVar("F", bound=Callable[..., Any])


class UsageProblem(TracegradeError, click.ClickException):
    """A clean, one-message failure with exit code 2 (bad input, missing store, locked file…)."""

    exit_code = 2


def friendly_errors(func: F) -> F:
    """Report expected errors (bad files, locked stores…) as one clear message and exit code 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (TracegradeError, FileNotFoundError) as exc:
            raise UsageProblem(str(exc)) from None

    return wrapper  # type: ignore[return-value]
