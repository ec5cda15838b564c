"""JSON report: the full EvalReport (warnings, skipped flags, token usage and cost included), with optional
parts of each case left out by flag. Values are never truncated here.

The text is strict JSON (RFC 8259, I-JSON), so jq and other strict parsers read it: a number that is not finite
is written as ``null`` and a lone surrogate (text no UTF-8 can hold) as U+FFFD.

The text is built case by case (:meth:`JSONReporter.pieces`), each piece exactly what ``json.dumps`` of the whole
would hold there, and a file is written piece by piece: a report of 10,000 cases otherwise holds its dicts twice
and its text twice at once, several times the memory of the report itself (figures: bench/RESULTS.md)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tracegrade.json_output import json_text, jsonable
from tracegrade.models.results import EvalCaseResult, EvalReport
from tracegrade.output_files import well_formed_text
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
        for case in data.get("results", []):
            self._trim_case(case)
        return data

    def _trim_case(self, case: dict[str, Any]) -> dict[str, Any]:
        """``case`` (one result as JSON values) minus the parts the include flags turn off."""
        for key in self._dropped_case_fields():
            case.pop(key, None)
        if not self.include_details:
            for criterion in case.get("criterion_results", []):
                criterion.pop("details", None)
        return case

    def to_json(self, report: EvalReport) -> str:
        return json_text(self.to_dict(report), indent=self.indent)

    def render(self, report: EvalReport) -> str:
        return "".join(self.pieces(report))

    @classmethod
    def quick_save(cls, report: EvalReport, path: str | Path, indent: int | None = 2) -> str:
        return cls(indent=indent).save(report, path)

    def pieces(self, report: EvalReport) -> Iterator[str]:
        """``render(report)`` in consecutive pieces: the text around the cases, then each case's.

        Joined, they are ``to_json(report) + "\\n"`` byte for byte: each case is dumped alone and indented as it
        sits in the whole (JSON text holds no raw newline inside a string, so indenting after each newline is exact).
        """
        # the report without its cases, still with its keys in order: "results" is where the cases go
        shell: dict[str, Any] = jsonable(
            report.model_copy(update={"results": []}).model_dump(warnings=False), strict=True
        )
        indent = self.indent
        if indent is None:
            opened, item_sep, closed, inner = "{", ", ", "}", ""
        else:
            pad = " " * indent  # what json.dumps puts per level for an int indent
            opened, item_sep, closed, inner = "{\n" + pad, ",\n" + pad, "\n}", pad
        yield opened
        for index, (key, value) in enumerate(shell.items()):
            lead = (item_sep if index else "") + json.dumps(key, ensure_ascii=False) + ": "
            if key == "results" and report.results:
                yield lead
                yield from self._case_pieces(report.results, inner)
            else:
                yield lead + _nested(_dumped(value, indent), inner)
        yield closed + "\n"

    def _case_pieces(self, cases: list[EvalCaseResult], outer: str) -> Iterator[str]:
        """The ``results`` array, one piece per case; ``outer`` is the indentation the array itself sits at."""
        indent = self.indent
        inner = outer + (" " * indent if indent is not None else "")
        newline = "\n" if indent is not None else ""
        separator = "," + (newline + inner if indent is not None else " ")
        for index, case in enumerate(cases):
            data = self._trim_case(jsonable(case.model_dump(warnings=False), strict=True))
            text = _nested(_dumped(data, indent), inner)
            yield (separator if index else "[" + newline + inner) + text
        yield newline + outer + "]"


def _dumped(value: Any, indent: int | None) -> str:
    """``value`` (plain JSON values) as strict JSON text, as :func:`~tracegrade.json_output.json_text` writes it."""
    return well_formed_text(json.dumps(value, indent=indent, ensure_ascii=False))


def _nested(text: str, pad: str) -> str:
    """JSON ``text`` dumped at the top level, indented by ``pad`` to sit one level deeper in an indented document."""
    return text.replace("\n", "\n" + pad) if pad else text
