"""In-process capture: the ``TrajectoryCollector`` span processor and instrumentation helpers."""

from tracegrade.capture.collector import TrajectoryCollector, make_trajectory_callback
from tracegrade.capture.context import TurnKey, TurnScope, current_tracer, turn_span
from tracegrade.capture.helpers import trace_node, trace_tool

__all__ = [
    "TrajectoryCollector",
    "TurnKey",
    "TurnScope",
    "current_tracer",
    "make_trajectory_callback",
    "trace_node",
    "trace_tool",
    "turn_span",
]
