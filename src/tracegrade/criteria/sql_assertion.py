"""SQL assertions: a query over the case's own trajectory that selects the violations (the dbt convention).

No rows means the assertion holds (score 1); any row is a violation (score 0) and the reason shows the
first ones. The query sees the case's traces as the store's tables (``tool_calls``, ``llm_calls``,
``node_visits``, ``spans``, ``traces``) in a locked-down in-memory database, built the same way live and
offline (see :mod:`tracegrade.criteria.trajectory_db`). A query that does not parse or bind, or is not one
read-only SELECT, is refused when the criterion is built.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from tracegrade.criteria.base import SyncCriterion
from tracegrade.criteria.registry import register_criterion
from tracegrade.criteria.trajectory_db import DEFAULT_ASSERTION_TIMEOUT, check_assertion_sql, sandbox
from tracegrade.errors import InvalidValueError
from tracegrade.models.config import CriterionConfig, SqlAssertion
from tracegrade.models.dataset import EvalCase
from tracegrade.models.execution import ExecutionResult
from tracegrade.models.results import CriterionResult
from tracegrade.store.results import decimal_json, interval_text

__all__ = ["SHOWN_CHARACTERS", "SHOWN_ITEMS", "SHOWN_VIOLATIONS", "SqlAssertionCriterion"]

SHOWN_VIOLATIONS = 5  # violating rows quoted in the reason and details
# a quoted value is cut past this many characters (a string) or items (a list): a row holding a tool call's
# whole arguments would otherwise copy them, megabytes perhaps, into the reason and details of every case
SHOWN_CHARACTERS = 500
SHOWN_ITEMS = 50
# violating rows fetched (and counted): a query selecting millions of rows would otherwise hold them all
# in Python, past any memory limit of the sandbox's database
COUNTED_VIOLATIONS = 10_000


def _plain(value: Any) -> Any:
    """A DuckDB result value as JSON can hold it (results and reports are JSON), long strings and lists cut
    (``SHOWN_CHARACTERS``, ``SHOWN_ITEMS``), saying how much was left out."""
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return decimal_json(value)
    if isinstance(value, datetime.timedelta):  # as ``tracegrade sql`` and DuckDB write an interval
        return interval_text(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        shown = [_plain(v) for v in value[:SHOWN_ITEMS]]
        return [*shown, f"… {len(value) - SHOWN_ITEMS} more items"] if len(value) > SHOWN_ITEMS else shown
    if isinstance(value, str):
        cut = len(value) - SHOWN_CHARACTERS
        return f"{value[:SHOWN_CHARACTERS]}… ({cut} more characters)" if cut > 0 else value
    if value is None or isinstance(value, (int, float, bool)):
        return value
    return _plain(str(value))  # UUID, …


@register_criterion()
class SqlAssertionCriterion(SyncCriterion):
    """One SQL assertion; its results are named ``sql_assertion:<name>``."""

    name = "sql_assertion"
    description = "A SQL query over the case's trajectory finds no violating rows"
    requires_reference = False

    def __init__(
        self,
        name: str,
        query: str,
        description: str = "",
        config: CriterionConfig | None = None,
        timeout_seconds: float = DEFAULT_ASSERTION_TIMEOUT,
    ) -> None:
        super().__init__(config or CriterionConfig(threshold=1.0))
        check_assertion_sql(name, query)
        if not timeout_seconds > 0:
            raise InvalidValueError(
                f"SQL assertion {name!r}: timeout_seconds must be a number of seconds above 0, got {timeout_seconds!r}"
            )
        self.assertion = name
        self.query = query
        self.timeout_seconds = timeout_seconds
        self.assertion_description = description
        self.name = f"sql_assertion:{name}"  # type: ignore[misc]  # one result key per assertion

    @classmethod
    def from_config(cls, assertion: SqlAssertion) -> SqlAssertionCriterion:
        return cls(assertion.name, assertion.query, assertion.description, timeout_seconds=assertion.timeout_seconds)

    def evaluate_sync(self, actual: ExecutionResult, expected: EvalCase) -> CriterionResult:
        box = sandbox()
        box.load(actual)
        # the rows past those shown are counted, not held: 10,000 rows of 100 KB were a gigabyte in Python
        columns, rows, found = box.run_counted(
            self.query, SHOWN_VIOLATIONS, COUNTED_VIOLATIONS + 1, timeout=self.timeout_seconds
        )
        shown = [dict(zip(columns, map(_plain, row))) for row in rows]
        counted = min(found, COUNTED_VIOLATIONS)
        details: dict[str, Any] = {
            "assertion": self.assertion,
            "query": self.query,
            "violations": counted,
            "violating_rows": shown,
        }
        if found > COUNTED_VIOLATIONS:
            details["violations_counted_up_to"] = COUNTED_VIOLATIONS
        if self.assertion_description:
            details["description"] = self.assertion_description
        if found:
            more = f" (first {len(shown)} shown)" if found > len(shown) else ""
            number = f"more than {counted}" if found > COUNTED_VIOLATIONS else str(counted)
            details["reason"] = f"{self.assertion}: {number} violating row{'s' if found != 1 else ''}{more}: {shown}"
        else:
            details["reason"] = f"{self.assertion}: no violating rows"
        return self._result(0.0 if found else 1.0, details)
