"""Span-to-trajectory mapping: the spans of one trace (or case) become the ``ExecutionResult`` criteria grade.

One module per convention (``genai``, ``openinference``, ``traceloop``, ``adk``, ``mlflow``, ``native``);
``sources`` holds the precedence between them and ``mapper`` the orchestration. The package is compiled
with mypyc where it was built so (``setup.py``); ``COMPILED`` says whether this copy runs compiled.
"""

from tracegrade.trajectory import mapper
from tracegrade.trajectory.mapper import MAPPER_REVISION, group_traces, map_spans

COMPILED: bool = not (mapper.__file__ or "").endswith(".py")

__all__ = ["COMPILED", "MAPPER_REVISION", "group_traces", "map_spans"]
