"""A read-only web UI over the trace store: traces, trajectories, grading runs, diffs and SQL.

Mounted at ``/ui/`` by ``tracegrade serve`` (behind the receiver's token) and by ``tracegrade ui`` on a
store file. Pages are server-rendered HTML with one small script; every asset ships in the wheel.
"""

from tracegrade.ui.app import add_ui_routes

__all__ = ["add_ui_routes"]
