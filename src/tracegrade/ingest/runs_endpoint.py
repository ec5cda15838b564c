"""``POST /v1/runs``: record a grading run in the store while ``tracegrade serve`` holds the file.

DuckDB lets one process open a file read-write, so while the server runs, ``tracegrade grade`` reads
through ``/v1/query`` and records its report here. The body is ``{"report": <EvalReport>, "kind":
"eval_set" | "reference_free" | "worker" | "live", "run_id": <optional id>}``; the answer is
``{"run_id": …}``. The write runs on a worker thread through ``TraceStore.write_records``, which shares the
store's write lock with the StoreWriter thread, so it never interleaves with span batches.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from tracegrade.errors import StoreError
from tracegrade.evaluation.run_records import RunSink, check_run_id, record_report
from tracegrade.ingest.expect_continue import add_post
from tracegrade.ingest.json_posts import Refusal, error_response, json_object, read_json_post
from tracegrade.ingest.tokens import Authorize
from tracegrade.models.results import EvalReport

__all__ = ["RUN_KINDS", "add_runs_route"]

RUN_KINDS = ("eval_set", "reference_free", "worker", "live")


def add_runs_route(
    app: web.Application, store: RunSink | Callable[[], RunSink], authorize: Authorize | None = None
) -> None:
    """Add ``POST /v1/runs`` to ``app`` (before it starts), recording into ``store`` (or the store that
    ``store()`` returns at the time: a receiver reopens its store after a failure).

    ``authorize`` receives the ``Authorization`` header and returns the caller's tenant, or raises to refuse
    (the receiver's ``Intake.authorize``, so the endpoint takes the same bearer token as every other one);
    the run is recorded as that tenant's.
    """

    async def record(request: web.Request) -> web.Response:
        try:
            tenant, body = await read_json_post(request, authorize, "the run", "grade with --no-record")
            report, kind, run_id = _parse(body)
        except Refusal as refusal:
            return refusal.response()
        except ValueError as exc:
            return error_response(400, str(exc))
        loop = asyncio.get_running_loop()
        try:
            sink = store() if callable(store) else store
        except Exception as exc:  # the store is being reopened: retryable
            return error_response(getattr(exc, "http_status", 503), str(exc))
        try:
            recorded = await loop.run_in_executor(None, record_report, sink, report, kind, run_id, tenant)
        except StoreError as exc:
            return error_response(500, f"recording the run failed: {exc}")
        return web.json_response({"run_id": recorded})

    add_post(app, "/v1/runs", record)


def _parse(body: bytes) -> tuple[EvalReport, str, str | None]:
    shape = '{"report": {...}, "kind": "...", "run_id": "..."}'
    document = json_object(body, shape, ("report", dict), ("kind", "run_id"))
    kind: Any = document.get("kind", "eval_set")
    if kind not in RUN_KINDS:
        raise ValueError(f"kind must be one of {', '.join(RUN_KINDS)}; got {kind!r}")
    run_id = document.get("run_id")
    if run_id is not None:
        check_run_id(run_id)  # an InvalidValueError is a ValueError: the caller's 400
    try:
        report = EvalReport.model_validate(document["report"])
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = "$.report" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
        raise ValueError(f"the report is not a valid EvalReport: at {where}: {first['msg']}") from None
    return report, kind, run_id
