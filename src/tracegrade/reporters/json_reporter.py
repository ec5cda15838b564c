"""JSON report: the full EvalReport (warnings, skipped flags, token usage and cost included), with optional
parts of each case left out by flag. Values are never truncated here."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tracegrade.models.results import EvalReport
from tracegrade.reporters.base import FileReporter
from tracegrade.reporters.text import jsonable

__all__ = ["JSONReporter"]

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


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
        data: dict[str, Any] = jsonable(report.model_dump(warnings=False))
        dropped = self._dropped_case_fields()
        for case in data.get("results", []):
            for key in dropped:
                case.pop(key, None)
            if not self.include_details:
                for criterion in case.get("criterion_results", []):
                    criterion.pop("details", None)
        return data

    def to_json(self, report: EvalReport) -> str:
        text = json.dumps(self.to_dict(report), indent=self.indent, ensure_ascii=False)
        # a lone surrogate cannot be written as UTF-8: keep it as the JSON escape it stands for
        return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)

    def render(self, report: EvalReport) -> str:
        return self.to_json(report) + "\n"

    @classmethod
    def quick_save(cls, report: EvalReport, path: str | Path, indent: int | None = 2) -> str:
        return cls(indent=indent).save(report, path)
