"""Tool arguments against their schemas: each recorded call validated with ``jsonschema``.

A call's schema is the one the config gives for its tool (``ToolSchemaConfig.schemas``), else the
parameters of the tool definition captured in the trace (``ExecutionResult.tool_definitions``). The score
is the fraction of checked calls whose arguments are valid; the reason names the call, the argument path
and the rule broken. Calls that cannot be checked (arguments not captured, a definition without a schema)
are listed apart and not counted. With no definition at all (none captured, none configured) the result
is an error saying so, never a pass.
"""

from __future__ import annotations

import json
from typing import Any

from jsonschema import exceptions as schema_errors
from jsonschema.validators import validator_for

from tracegrade.criteria.base import SyncCriterion
from tracegrade.criteria.registry import register_criterion
from tracegrade.models.config import CriterionConfig, ToolSchemaConfig
from tracegrade.models.dataset import EvalCase, ToolCall
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult

__all__ = ["ToolSchemaCriterion", "argument_path"]

NO_DEFINITIONS = (
    "no tool definitions were captured in the trace and none are configured, so no argument can be checked; "
    "enable capture of the tools offered to the model (gen_ai.tool.definitions, llm.tools) or give JSON "
    "Schemas in tool_schema.schemas"
)


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
            validator = validators[key] = cls(schema)
        found = sorted(validator.iter_errors(args), key=lambda e: list(map(str, e.absolute_path)))
        return [{"path": argument_path(e.absolute_path), "rule": f"{e.validator}: {e.message}"} for e in found]
