"""Tool arguments against their schemas: each recorded call validated with ``jsonschema``.

A call's schema is the one the config gives for its tool (``ToolSchemaConfig.schemas``), else the
parameters of the tool definition captured in the trace (``ExecutionResult.tool_definitions``). The score
is the fraction of checked calls whose arguments are valid; the reason names the call, the argument path
and the rule broken. Calls that cannot be checked (arguments not captured, a definition without a schema)
are listed apart and not counted. With no definition at all (none captured, none configured) the result
is an error saying so, never a pass.

A schema captured in a trace is whatever the traced process (or anyone who can send spans) wrote, so it is
applied with references resolved inside the schema only: a ``$ref`` to a URL or file is never fetched (the
grader would otherwise open any address a trace names), and a reference that cannot be resolved or that loops
without end fails the calls it applies to, saying so, rather than the whole grading. Its ``pattern`` and
``patternProperties`` are matched with a time limit (``PATTERN_TIMEOUT`` a value, ``CALL_PATTERN_TIMEOUT`` a call
in all, with the ``regex`` module), also where ``additionalProperties`` reads them: Python's ``re`` cannot be
stopped, and a pattern that backtracks without end (``^(a|aa)+$`` on a long value) would hang the grader, for a
second or more per argument; a match that runs out of time, or a pattern the ``regex`` module cannot read, fails
the call, naming the pattern. A schema with both ``unevaluatedProperties`` and
``patternProperties`` fails the calls too (jsonschema matches those patterns with ``re`` there, without a limit).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

import regex
from jsonschema import exceptions as schema_errors
from jsonschema.validators import extend, validator_for
from referencing import Registry
from referencing.exceptions import NoSuchResource, Unresolvable

from tracegrade.criteria.base import SyncCriterion
from tracegrade.criteria.registry import register_criterion
from tracegrade.errors import TracegradeError
from tracegrade.models.config import CriterionConfig, ToolSchemaConfig
from tracegrade.models.dataset import EvalCase, ToolCall
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult

__all__ = ["CALL_PATTERN_TIMEOUT", "PATTERN_TIMEOUT", "ToolSchemaCriterion", "argument_path"]

PATTERN_TIMEOUT = 1.0  # seconds one schema pattern may take to match one value
# seconds all of one call's pattern matches may take together: a captured schema's catastrophic pattern against a
# call of many arguments would otherwise cost PATTERN_TIMEOUT (or more, under load) per argument and keyword
CALL_PATTERN_TIMEOUT = 5.0

NO_DEFINITIONS = (
    "no tool definitions were captured in the trace and none are configured, so no argument can be checked; "
    "enable capture of the tools offered to the model (gen_ai.tool.definitions, llm.tools) or give JSON "
    "Schemas in tool_schema.schemas"
)


def _no_retrieval(uri: str) -> Any:
    """Refuse every reference outside the schema: jsonschema's default would fetch an http(s) or file URL."""
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]  # an attrs class mypy reads without its fields


# resolves a schema's references within the schema itself (and the JSON Schema meta-schemas); fetches nothing
_LOCAL_REFERENCES: Registry[Any] = Registry(retrieve=_no_retrieval)  # type: ignore[call-arg]  # attrs, as above


# when the matches of the call being checked must end (time.monotonic()); None outside a check
_call_deadline: ContextVar[float | None] = ContextVar("tool_schema_call_deadline", default=None)


class _CallOutOfTime(TracegradeError, TimeoutError):
    """The call's matches used up ``CALL_PATTERN_TIMEOUT`` together (reported as the call's violation)."""


def _matches(pattern: str, text: str) -> bool:
    """``re.search`` within ``PATTERN_TIMEOUT`` and what is left of the call's ``CALL_PATTERN_TIMEOUT``
    (TimeoutError past either). A pattern the ``regex`` module cannot read raises regex.error: ``re`` reads a few
    more (a literal ``{`` before a letter, which ``regex`` takes for a fuzzy match), but has no time limit, and
    ``^(a|aa)+${i`` backtracked in it without end."""
    timeout = PATTERN_TIMEOUT
    deadline = _call_deadline.get()
    if deadline is not None:
        left = deadline - time.monotonic()
        if left <= 0:
            raise _CallOutOfTime
        timeout = min(timeout, left)
    try:
        return regex.compile(pattern).search(text, timeout=timeout) is not None
    except TimeoutError:
        if timeout < PATTERN_TIMEOUT:
            raise _CallOutOfTime from None
        raise


_UNMATCHABLE = (TimeoutError, regex.error)  # what _matches raises instead of answering


def _unmatched(pattern: str, exc: Exception) -> schema_errors.ValidationError:
    """The violation of a value ``pattern`` could not be matched against (``exc``: one of ``_UNMATCHABLE``)."""
    if isinstance(exc, _CallOutOfTime):
        return schema_errors.ValidationError(
            f"the pattern {pattern!r} was not matched against this value: the call's pattern matches took more than "
            f"{CALL_PATTERN_TIMEOUT:g} s together and were given up (a pattern that backtracks without end, such as "
            "(a|aa)+, against many arguments); simplify the pattern"
        )
    if isinstance(exc, TimeoutError):
        return schema_errors.ValidationError(
            f"the pattern {pattern!r} took more than {PATTERN_TIMEOUT:g} s to match this value and was given up (it "
            "backtracks without end on it: nested or overlapping repetition such as (a|aa)+); simplify the pattern"
        )
    return schema_errors.ValidationError(
        f"the pattern {pattern!r} cannot be matched with a time limit: the regex module reads it as invalid ({exc}); "
        "escape a literal brace as \\{"
    )


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[schema_errors.ValidationError]:
    """jsonschema's ``pattern`` keyword, within the time limit."""
    if not validator.is_type(instance, "string"):
        return
    try:
        if not _matches(pattern, instance):
            yield schema_errors.ValidationError(f"{instance!r} does not match {pattern!r}")
    except _UNMATCHABLE as exc:
        yield _unmatched(pattern, exc)


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[schema_errors.ValidationError]:
    """jsonschema's ``patternProperties`` keyword, each key matched within the time limit."""
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            try:
                matched = _matches(pattern, key)
            except _UNMATCHABLE as exc:
                error = _unmatched(pattern, exc)
                error.path.appendleft(key)  # the argument whose name could not be matched
                yield error
                continue
            if matched:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _matched_or_reported(patterns: dict[str, Any], key: str) -> bool:
    """Whether ``key`` matches one of ``patterns``; one that cannot be matched against it counts as a match, as
    ``patternProperties`` already reports it."""
    for pattern in patterns:
        try:
            if _matches(pattern, key):
                return True
        except _UNMATCHABLE:
            return True
    return False


def _additional_properties_of(original: Any) -> Any:
    """jsonschema's ``additionalProperties`` keyword (``original``), ``patternProperties`` matched within the time
    limit: jsonschema's own matches them with ``re``, without one."""

    def additional_properties(
        validator: Any, allowed: Any, instance: Any, schema: Any
    ) -> Iterator[schema_errors.ValidationError]:
        patterns = schema.get("patternProperties")
        if not patterns or not validator.is_type(instance, "object"):
            yield from original(validator, allowed, instance, schema)
            return
        properties = schema.get("properties", {})
        extras = sorted(k for k in instance if k not in properties and not _matched_or_reported(patterns, k))
        if validator.is_type(allowed, "object"):
            for key in extras:
                yield from validator.descend(instance[key], allowed, path=key)
        elif not allowed and extras:  # jsonschema's words for this case
            verb = "does" if len(extras) == 1 else "do"
            names = ", ".join(map(repr, extras))
            yield schema_errors.ValidationError(
                f"{names} {verb} not match any of the regexes: {', '.join(map(repr, sorted(patterns)))}"
            )

    return additional_properties


def _has_key(schema: Any, key: str) -> bool:
    """Whether ``key`` is a key of ``schema`` or of any object within it."""
    if isinstance(schema, dict):
        return key in schema or any(_has_key(value, key) for value in schema.values())
    return isinstance(schema, list) and any(_has_key(item, key) for item in schema)


@functools.cache
def _bounded(cls: Any) -> Any:
    """``cls`` (a jsonschema validator class) with its pattern keywords matched within the time limit."""
    keywords = {"pattern": _pattern, "patternProperties": _pattern_properties}
    keywords["additionalProperties"] = _additional_properties_of(cls.VALIDATORS["additionalProperties"])
    return extend(cls, keywords)


def argument_path(path: Any) -> str:
    """A jsonschema error path as ``$.a[0].b``."""
    text = "$"
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else f".{part}"
    return text


def _innermost(error: schema_errors.SchemaError) -> schema_errors.SchemaError:
    """The most specific of an error's alternatives: "'objekt' is not one of [...]" at ``type`` rather than
    "is not valid under any of the given schemas" (the meta-schema allows a type name or a list of them)."""
    while error.context:
        error = schema_errors.best_match(error.context)  # type: ignore[assignment]
    return error


def _call_label(index: int, call: ToolCall) -> str:
    return f"call {index} {call.name!r}" + (f" ({call.call_id})" if call.call_id else "")


@register_criterion()
class ToolSchemaCriterion(SyncCriterion):
    """Validates every recorded tool call's arguments against its tool's JSON Schema."""

    name = "tool_schema"
    description = "Every tool call's arguments are valid for the tool's schema"
    reads = frozenset({"tool_calls", "tool_definitions"})
    requires_reference = False

    def __init__(self, config: CriterionConfig | None = None) -> None:
        super().__init__(ToolSchemaConfig.coerce(config))
        self.settings: ToolSchemaConfig = self.config  # type: ignore[assignment]

    def validate_config(self) -> list[str]:
        problems = super().validate_config()
        for tool, schema in self.settings.schemas.items():
            try:
                validator_for(schema).check_schema(schema)
            except schema_errors.SchemaError as exc:
                error = _innermost(exc)
                where = f"schemas[{tool!r}]{argument_path(error.absolute_path)[1:]}"
                problems.append(f"{where}: {error.message} (schemas[{tool!r}] is not a valid JSON Schema)")
        return problems

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        schemas = self.settings.schemas
        if not schemas and not actual.tool_definitions:
            return self._failure(NO_DEFINITIONS, {"state": "no_definitions"})
        validators: dict[str, Any] = {}
        valid: list[str] = []
        invalid: list[dict[str, Any]] = []
        unchecked: list[dict[str, Any]] = []
        for index, call in enumerate(actual.tool_calls):
            label = _call_label(index, call)
            schema, source = self._schema(actual, call.name)
            if source is None:
                if self.settings.undefined_tools == "fail":
                    rule = "the tool has no definition (the model was not offered it)"
                    invalid.append({"call": label, "path": "$", "rule": rule})
                else:
                    unchecked.append({"call": label, "why": "no definition"})
                continue
            if schema is None:
                unchecked.append({"call": label, "why": "its definition has no parameter schema"})
                continue
            if not call.args_captured:
                unchecked.append({"call": label, "why": "arguments not captured"})
                continue
            errors = self._errors(validators, schema, call.args)
            if errors:
                invalid += [{"call": label, "source": source, **error} for error in errors]
            else:
                valid.append(label)
        failed_calls = len({v["call"] for v in invalid})
        checked = len(valid) + failed_calls
        details: dict[str, Any] = {"valid_calls": valid, "violations": invalid, "unchecked": unchecked}
        if not checked:
            if not actual.tool_calls:
                details["reason"] = "no tool calls to check"
                return self._result(1.0, details)
            details["state"] = "nothing_checkable"
            return self._failure(
                "no tool call could be checked: " + "; ".join(f"{u['call']}: {u['why']}" for u in unchecked), details
            )
        if invalid:
            shown = "; ".join(f"{v['call']} at {v['path']}: {v['rule']}" for v in invalid[:5])
            details["reason"] = f"{failed_calls} of {checked} checked calls broke their schema: {shown}"
        else:
            details["reason"] = f"all {checked} checked calls match their schema"
        return self._result(len(valid) / checked, details)

    def _schema(self, actual: ExecutionResult, tool: str) -> tuple[dict[str, Any] | None, str | None]:
        """The schema for ``tool`` and where it came from (``config``/``trace``; None: no definition)."""
        if tool in self.settings.schemas:
            return self.settings.schemas[tool], "config"
        definition = actual.tool_definition(tool)
        if definition is None:
            return None, None
        return definition.parameters, "trace"

    @staticmethod
    def _errors(validators: dict[str, Any], schema: dict[str, Any], args: Any) -> list[dict[str, str]]:
        key = json.dumps(schema, sort_keys=True, default=str)
        validator = validators.get(key)
        if validator is None:
            cls = validator_for(schema)
            try:
                cls.check_schema(schema)
            except schema_errors.SchemaError as exc:
                return [{"path": "$", "rule": f"the tool's schema is not valid JSON Schema: {exc.message}"}]
            if "unevaluatedProperties" in cls.VALIDATORS and all(
                _has_key(schema, word) for word in ("unevaluatedProperties", "patternProperties")
            ):  # jsonschema matches patternProperties with re to find the evaluated keys, without a time limit
                rule = (
                    "the tool's schema cannot be applied: unevaluatedProperties is not checked in a schema with "
                    "patternProperties (their patterns would be matched without a time limit); use additionalProperties"
                )
                return [{"path": "$", "rule": rule}]
            validator = validators[key] = _bounded(cls)(schema, registry=_LOCAL_REFERENCES)
        deadline = _call_deadline.set(time.monotonic() + CALL_PATTERN_TIMEOUT)
        try:
            found = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
        except Unresolvable as exc:
            ref = str(getattr(exc, "ref", None) or getattr(getattr(exc, "_wrapped", None), "ref", None) or exc)
            ref = f"#{ref}" if ref.startswith("/") else ref  # a JSON pointer that points nowhere in the schema
            rule = (
                f"the tool's schema cannot be applied: its $ref {ref!r} does not resolve within the schema "
                "(references to URLs or files are never fetched; define the referenced schema under $defs)"
            )
            return [{"path": "$", "rule": rule}]
        except RecursionError:
            rule = (
                "the tool's schema cannot be applied: its $ref references loop without end (a $ref that leads back "
                "to itself without descending into the arguments), or the arguments nest too deeply to check"
            )
            return [{"path": "$", "rule": rule}]
        finally:
            _call_deadline.reset(deadline)
        return [{"path": argument_path(e.absolute_path), "rule": f"{e.validator}: {e.message}"} for e in found]
