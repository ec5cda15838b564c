"""Criterion results as OpenTelemetry ``gen_ai.evaluation.result`` events, so any OTLP backend shows them on
the evaluated trace.

One log record per criterion result, following the GenAI semantic conventions: ``event.name``
``gen_ai.evaluation.result``, ``gen_ai.evaluation.name`` (the criterion), ``gen_ai.evaluation.score.value``,
``gen_ai.evaluation.score.label`` (``pass``/``fail``), ``gen_ai.evaluation.explanation`` and ``error.type``
when the evaluation itself failed; the run and case ids as ``test.suite.run.id`` / ``test.case.id`` (the
open test semantic-conventions proposal) and tracegrade's own keys. Each record carries the trace and span
id of the evaluated trace's root span. Records go through the OTel Logs SDK: a ``LoggerProvider`` you pass,
or one with the standard OTLP/HTTP log exporter (``pip install opentelemetry-exporter-otlp-proto-http``,
imported only then) to ``endpoint`` or the ``OTEL_EXPORTER_OTLP_*`` environment settings.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from opentelemetry._logs import SeverityNumber
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.trace import TraceFlags

from tracegrade.errors import TracegradeError
from tracegrade.evaluation.selection import QueryableStore
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.store.evaluations import EVALUATION_EVENT

__all__ = ["EVENT_NAME", "EvaluationEventEmitter", "evaluation_attributes", "root_spans"]

try:  # OTel SDK < 1.35 emits its own LogRecord class (which carries the resource); newer ones take the API's
    from opentelemetry.sdk._logs import LogRecord  # type: ignore[attr-defined]
except ImportError:
    from opentelemetry._logs import LogRecord

EVENT_NAME = EVALUATION_EVENT  # the receiver files these in its evaluations table
_SCOPE = "tracegrade.evaluation"


class EvaluationEventEmitter:
    """Emits criterion results as events; ``close()`` flushes them (and shuts down a provider it made)."""

    def __init__(self, logger_provider: LoggerProvider | None = None, endpoint: str | None = None) -> None:
        self._owned = logger_provider is None
        self.provider = logger_provider or _otlp_provider(endpoint)
        self.logger = self.provider.get_logger(_SCOPE)

    def emit_case(self, result: EvalCaseResult, run_id: str | None, roots: Mapping[str, str]) -> int:
        """One event per criterion result of ``result``, parented to the root span of its first trace found in
        ``roots`` (trace id -> root span id); returns how many were emitted."""
        trace_id = next((t for t in result.trace_ids if t in roots), None)
        parent = (int(trace_id, 16), int(roots[trace_id], 16)) if trace_id else None
        now = time.time_ns()
        for criterion in result.criterion_results:
            self.logger.emit(_record(evaluation_attributes(result, criterion, run_id), parent, now, self.provider))
        return len(result.criterion_results)

    def emit_report(self, report: EvalReport, roots: Mapping[str, str], run_id: str | None = None) -> int:
        run_id = run_id or report.metadata.get("run_id")
        return sum(self.emit_case(r, run_id, roots) for r in report.results)

    def close(self) -> None:
        self.provider.force_flush()
        if self._owned:
            self.provider.shutdown()


def evaluation_attributes(result: EvalCaseResult, criterion: CriterionResult, run_id: str | None) -> dict[str, Any]:
    """The attributes of one criterion's ``gen_ai.evaluation.result`` event."""
    attributes: dict[str, Any] = {
        "event.name": EVENT_NAME,  # also the record's event_name where the SDK has it
        "gen_ai.evaluation.name": criterion.criterion,
        "test.case.id": result.eval_id,
        "tracegrade.case.id": result.eval_id,
        "tracegrade.evaluation.threshold": criterion.threshold,
        "tracegrade.evaluation.skipped": criterion.skipped,
    }
    if run_id:
        attributes["test.suite.run.id"] = attributes["tracegrade.run.id"] = run_id
    if criterion.error is not None:
        attributes["error.type"] = "tracegrade.evaluation_error"
        attributes["gen_ai.evaluation.explanation"] = criterion.error
        return attributes
    attributes["gen_ai.evaluation.score.value"] = criterion.score
    if not criterion.skipped:
        attributes["gen_ai.evaluation.score.label"] = "pass" if criterion.passed else "fail"
    if criterion.reason:
        attributes["gen_ai.evaluation.explanation"] = str(criterion.reason)
    if criterion.trial_stats is not None:
        attributes["tracegrade.evaluation.trials"] = criterion.trial_stats.trials
    return attributes


def root_spans(store: QueryableStore, trace_ids: list[str]) -> dict[str, str]:
    """Trace id -> its root span's id, for the stored traces among ``trace_ids`` (one query)."""
    if not trace_ids:
        return {}
    marks = ", ".join("?" * len(trace_ids))
    rows = store.query(
        f"SELECT trace_id, min(span_id) FROM spans WHERE trace_id IN ({marks}) "
        "AND (parent_span_id IS NULL OR parent_span_id = '') GROUP BY trace_id",
        list(trace_ids),
    ).rows
    return {str(t): str(s) for t, s in rows}


def _record(attributes: dict[str, Any], parent: tuple[int, int] | None, now: int, provider: LoggerProvider) -> Any:
    trace_id, span_id = parent or (0, 0)
    fields: dict[str, Any] = {
        "timestamp": now,
        "observed_timestamp": now,
        "trace_id": trace_id,
        "span_id": span_id,
        "trace_flags": TraceFlags(TraceFlags.SAMPLED if parent else TraceFlags.DEFAULT),
        "severity_number": SeverityNumber.INFO,
        "severity_text": "INFO",
        "attributes": attributes,
    }
    accepted = LogRecord.__init__.__code__.co_varnames
    if "event_name" in accepted:  # OTel >= 1.35: a first-class event name
        fields["event_name"] = EVENT_NAME
    if "resource" in accepted:
        fields["resource"] = provider.resource
    return LogRecord(**fields)


def _otlp_provider(endpoint: str | None) -> LoggerProvider:
    try:
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    except ImportError:
        raise TracegradeError(
            "emitting evaluation events over OTLP needs the OTLP/HTTP exporter: "
            "pip install opentelemetry-exporter-otlp-proto-http (or pass your own LoggerProvider)"
        ) from None
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    url = endpoint.rstrip("/") + "/v1/logs" if endpoint and not endpoint.rstrip("/").endswith("/v1/logs") else endpoint
    provider = LoggerProvider()
    provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter(endpoint=url)))
    return provider
