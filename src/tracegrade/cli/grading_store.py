"""Opening the store for the grading commands: read for matching, and a sink to record runs in.

With no server running, the file is opened read-write and serves both. While ``tracegrade serve``
holds the file, reads go through its query endpoint and runs are recorded through its ``/v1/runs``
endpoint (the server is the file's single writer). A lake has no single holder: it is opened directly,
read-write (with its data path) when a run is to be recorded, read-only otherwise. Opened directly, the
store is read, and runs are recorded, as the command's ``--tenant`` (see ``store_access.as_tenant``).
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tracegrade.cli.store_access import as_tenant, chosen_tenant, open_writable_store, warn_of_unstored_journal
from tracegrade.errors import StoreError, StoreLockedError
from tracegrade.evaluation.run_records import RunSink, record_report
from tracegrade.json_output import json_text
from tracegrade.models.results import EvalReport
from tracegrade.store.lake_location import is_lake_location
from tracegrade.store.tenancy import DEFAULT_TENANT, grading_for

__all__ = ["GradingStore", "open_grading_store"]


@dataclass
class GradingStore:
    """A readable store plus, when possible, a writable one for recording runs (as ``tenant``'s)."""

    reader: Any
    sink: RunSink | None
    remote_url: str | None = None
    token: str | None = None
    tenant: str = DEFAULT_TENANT

    def record(self, report: EvalReport, kind: str, run_id: str | None = None) -> str:
        if self.sink is not None:
            return record_report(self.sink, report, kind, run_id, self.tenant)
        if self.remote_url is None:
            raise StoreError("this store is open read-only; results cannot be recorded")
        # strict JSON, as every report tracegrade writes: a score that is not a number (NaN) goes as null, which
        # the report models read back as NaN (a bare NaN token is not JSON, and strict parsers refuse the body)
        body = json_text({"report": report, "kind": kind, "run_id": run_id}, indent=None).encode("utf-8")
        request = urllib.request.Request(
            self.remote_url.rstrip("/") + "/v1/runs",
            data=body,
            headers={
                "Content-Type": "application/json",
                **({"Authorization": f"Bearer {self.token}"} if self.token else {}),
            },
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as response:
                answer = json.loads(response.read())
            if not isinstance(answer, dict) or "run_id" not in answer:
                raise ValueError(f"its answer is not the recorded run's id ({{'run_id': ...}}): {str(answer)[:200]}")
            return str(answer["run_id"])
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace").strip()[:500]
            hint = " (this server cannot record runs; grade with --no-record)" if exc.code == 404 else ""
            raise StoreError(
                f"the server at {self.remote_url} refused to record the run ({exc.code}: {detail}){hint}"
            ) from None
        except (OSError, ValueError, http.client.HTTPException) as exc:  # HTTPException: an answer that is no HTTP
            reason = str(exc) or type(exc).__name__
            raise StoreError(f"could not record the run through the server at {self.remote_url}: {reason}") from None


@contextmanager
def open_grading_store(
    path: Path | str, token: str | None, writable: bool = True, lake_data: Path | None = None
) -> Iterator[GradingStore]:
    """Open ``path`` (a file or a lake location) for grading; errors (missing, corrupt, locked with no
    server) are StoreErrors. ``lake_data`` is a lake's data path, which recording in a lake needs."""
    tenant = chosen_tenant()
    with grading_for(tenant):  # judge replies are cached as its own
        yield from _opened(path, token, writable, lake_data, tenant or DEFAULT_TENANT)


def _opened(
    path: Path | str, token: str | None, writable: bool, lake_data: Path | None, tenant: str
) -> Iterator[GradingStore]:
    from tracegrade.store import RemoteStore, TraceStore, open_store_for_read
    from tracegrade.store.database import store_not_found

    if is_lake_location(path):
        sink = open_writable_store(path, lake_data, "recording the run") if writable else None
        lake = sink or open_store_for_read(path)
        try:
            yield GradingStore(as_tenant(lake), sink, tenant=tenant)
        finally:
            lake.close()
        return
    path = Path(path)
    if not path.exists():
        raise store_not_found(path)
    if writable:
        try:
            store = TraceStore(path)
        except StoreLockedError:
            pass
        else:
            warn_of_unstored_journal(path)
            try:
                yield GradingStore(as_tenant(store), store, tenant=tenant)
            finally:
                store.close()
            return
    reader = open_store_for_read(path, token=token)
    try:
        if isinstance(reader, RemoteStore):
            yield GradingStore(as_tenant(reader), None, reader.url, reader.token)
        else:
            warn_of_unstored_journal(path)
            yield GradingStore(as_tenant(reader), None)
    finally:
        close = getattr(reader, "close", None)
        if close:
            close()
