"""Helpers shared by CLI commands: clean messages and exit codes for expected errors, and the option types
that check a value the same way wherever it is taken (durations, endpoint URLs)."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit

import click

from tracegrade.errors import InvalidValueError, TracegradeError

if TYPE_CHECKING:
    from tracegrade.models.config import EvalConfig

__all__ = [
    "HTTP_URL",
    "NO_CONFIG_NOTE",
    "Duration",
    "HttpUrl",
    "UsageProblem",
    "friendly_errors",
    "judge_free_default",
    "log_to_stderr",
    "logged_errors",
    "no_config_default",
]

# a long-running command's log: when each line happened matters as much as what it says
_LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_LOG_DATE_FORMAT = "%Y-%m-%dT%H:%M:%S%z"

F = TypeVar("F", bound=Callable[..., Any])

# What a command run without --config says it graded with, and how to add the judge it leaves out.
NO_CONFIG_NOTE = (
    "no --config: graded with trajectory (EXACT, threshold 1.0) and rouge_match (threshold 0.5), which need no "
    "LLM judge; to judge responses, pass --config FILE enabling response_match, e.g. "
    '{"criteria": {"response_match": {"judge_model": "gemini-2.5-flash"}}}, with the judge\'s key '
    "(GEMINI_API_KEY for that model, or the criterion's api_base/api_key)"
)


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


class Duration(click.ParamType):
    """A positive duration with a unit (``30s``, ``5m``, ``1h``), read by :func:`tracegrade.timespec.parse_duration`;
    ``allow_zero`` also takes ``0s``. A date, a bare number or a negative value is refused."""

    name = "duration"

    def __init__(self, *, allow_zero: bool = False) -> None:
        self.allow_zero = allow_zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        from tracegrade.timespec import parse_duration

        option = param.opts[0] if param is not None and param.opts else "duration"
        try:
            return parse_duration(str(value), option, allow_zero=self.allow_zero)
        except InvalidValueError as exc:
            self.fail(str(exc).removeprefix(f"{option} "), param, ctx)  # click names the option already


class HttpUrl(click.ParamType):
    """An ``http://`` or ``https://`` URL with a host (an OTLP/HTTP endpoint), checked before anything runs."""

    name = "url"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).strip()
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises ValueError for a port that is not a number in 0-65535
        except ValueError as exc:
            self.fail(f"{text!r} is not a valid URL: {exc}", param, ctx)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            self.fail(
                f"{text!r} is not an http:// or https:// URL with a host (e.g. http://collector:4318)", param, ctx
            )
        return text


HTTP_URL = HttpUrl()


@contextlib.contextmanager
def logged_errors(logger_name: str) -> Iterator[list[str]]:
    """The messages of ERROR records ``logger_name`` (and its children) log inside the block: for libraries that
    log a failure rather than raise it (OpenTelemetry's exporters), so a command can report it."""
    messages: list[str] = []

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            messages.append(record.getMessage())

    handler = _Collect(logging.ERROR)
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield messages
    finally:
        logger.removeHandler(handler)


def log_to_stderr() -> None:
    """Send tracegrade's warnings and errors to stderr, each line with its time and level (``serve``, ``worker``).

    Without a handler of its own Python's last-resort handler prints the bare message. Does nothing when the
    ``tracegrade`` logger already has a handler (an embedding program configured it).
    """
    logger = logging.getLogger("tracegrade")
    if logger.handlers:
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(_LOG_FORMAT, _LOG_DATE_FORMAT))
    logger.addHandler(handler)


def judge_free_default() -> EvalConfig:
    """The criteria an eval set is graded with when no config is given (``grade``, ``run``, MCP ``grade``):
    ``EvalConfig.default()`` (the Python API's default, kept as the seed defines it) with its judged
    ``response_match`` swapped for ``EvalPresets.quick_check``'s ROUGE, so that a first run with no judge set up
    grades rather than failing every case on "No LLM provider available"."""
    from tracegrade.evaluation.presets import EvalPresets
    from tracegrade.models.config import EvalConfig

    config = EvalConfig.default()
    config.criteria.response_match = None
    config.criteria.rouge_match = EvalPresets.quick_check().criteria.rouge_match
    return config


def refuse_unreachable_judges(config: EvalConfig) -> None:
    """A UsageProblem when an enabled judged criterion has no provider that can serve its judge (no credentials,
    an unknown provider): grading would give every case it judges 0.5 with "No LLM provider available", after
    running the whole eval set, so the command says so before any work instead."""
    from tracegrade.criteria.llm.base import TemplatedLLMCriterion
    from tracegrade.criteria.registry import criterion_class
    from tracegrade.judges.providers import provider_problem

    problems = []
    for slot, cfg in config.criteria.enabled_slots():
        if issubclass(criterion_class(slot, cfg), TemplatedLLMCriterion):
            problem = provider_problem(cfg.judge_model, cfg.api_key, cfg.api_base, cfg.use_vertex_ai)
            if problem is not None:
                problems.append(f"criteria.{slot}: {problem}")
    if problems:
        raise UsageProblem(
            f"no judge can be reached ({'; '.join(problems)}); set the judge's key (or the criterion's api_key / "
            "api_base), or disable those criteria in the config"
        )


def no_config_default() -> EvalConfig:
    """:func:`judge_free_default`, said on stderr (:data:`NO_CONFIG_NOTE`): what a command without --config
    graded with, and how to add a judge."""
    config = judge_free_default()
    click.echo(NO_CONFIG_NOTE, err=True)
    return config
