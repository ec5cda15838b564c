"""Span-to-trajectory mapping: the spans of one trace (or case) become the ``ExecutionResult`` criteria grade.

One module per convention (``genai``, ``openinference``, ``traceloop``, ``adk``, ``mlflow``, ``native``);
``sources`` holds the precedence between them and ``mapper`` the orchestration.
"""

from tracegrade.trajectory.mapper import group_traces, map_spans

__all__ = ["group_traces", "map_spans"]
