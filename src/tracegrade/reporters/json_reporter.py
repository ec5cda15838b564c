"""JSON report: the full EvalReport (warnings, skipped flags, token usage and cost included), with optional
parts of each case left out by flag. Values are never truncated here.

The text is strict JSON (RFC 8259, I-JSON), so jq and other strict parsers read it: a number that is not finite
is written as ``null`` and a lone surrogate (text no UTF-8 can hold) as U+FFFD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tracegrade.json_output import json_text, jsonable
from tracegrade.models.results import EvalReport
from tracegrade.reporters.base import FileReporter

__all__ = ["JSONReporter"]


class JSONReporter(FileReporter):
    """Writes the report as JSON that :meth:`EvalReport.model_validate` reads back."""

    default_filename = "report.json"

    def __init__(
        self,
        indent: int | None = 2,
        include_details: bool = True,
        include_trajectory: bool = True,
        include_node_responses: bool = True,
        include_actual_response: bool = True,
        include_tool_call_details: bool = True,
    ) -> None:
        self.indent = indent
        self.include_details = include_details
        self.include_trajectory = include_trajectory
        self.include_node_responses = include_node_responses
        self.include_actual_response = include_actual_response
        self.include_tool_call_details = include_tool_call_details

    def _dropped_case_fields(self) -> list[str]:
        dropped = []
        if not self.include_trajectory:
            dropped.append("actual_trajectory")
        if not self.include_tool_call_details:
            dropped.append("actual_tool_calls")
        if not self.include_node_responses:
            dropped += ["node_responses", "node_details"]
        if not self.include_actual_response:
            dropped.append("actual_response")
        return dropped

    def to_dict(self, report: EvalReport) -> dict[str, Any]:
        """The report as plain JSON values, minus the parts the include flags turn off."""
        data: dict[str, Any] = jsonable(report.model_dump(warnings=False), strict=True)
        dropped = self._dropped_case_fields()
        for case in data.get("results", []):
            for key in dropped:
                case.pop(key, None)
            if not self.include_details:
                for criterion in case.get("criterion_results", []):
                    criterion.pop("details", None)
        return data

    def to_json(self, report: EvalReport) -> str:
        return json_text(self.to_dict(report), indent=self.indent)

    def render(self, report: EvalReport) -> str:
        return self.to_json(report) + "\n"

    @classmethod
    def quick_save(cls, report: EvalReport, path: str | Path, indent: int | None = 2) -> str:
        return cls(indent=indent).save(report, path)
