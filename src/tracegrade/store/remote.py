"""RemoteStore: read-only queries through a running `tracegrade serve` (its POST /v1/query endpoint).

Used when the server holds the DuckDB file (DuckDB allows one read-write process per file, and no
reader next to it). A small synchronous urllib client: the CLI has no event loop to share.

The server returns at most its ``--query-max-rows`` rows of a result and says when it cut one
(``truncated``). A caller that asked for a cap itself (``QueryControl.max_rows``) gets the cut result;
any other caller gets an error, never part of a result taken for the whole of it.
"""

from __future__ import annotations

import base64
import decimal
import functools
import http.client
import json
import re
import urllib.error
import urllib.request
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from tracegrade.errors import StoreError
from tracegrade.store.arrow_types import FROM_JSON_TEXT
from tracegrade.store.query_control import QueryControl
from tracegrade.store.results import NON_FINITE, QueryResult
from tracegrade.store.trace_deletion import Deleted

if TYPE_CHECKING:
    from tracegrade.store.file_purge import Purged
    from tracegrade.store.outdated import RebuildScope, RebuiltStep
    from tracegrade.store.rebuild_progress import RebuildDone, RebuildStart

__all__ = ["HEALTHZ_SERVER", "RemoteStore"]

# what a tracegrade receiver's /healthz says in its ``server`` field: how a client tells it from another program
HEALTHZ_SERVER = "tracegrade"
_HEALTHZ_MOST = 65536  # /healthz's body is a few hundred bytes; a larger answer is not a tracegrade server's
_RECEIVER_METRICS_START = b"# HELP tracegrade_receiver_"  # every receiver's /metrics page opens so


# float columns (and lists of floats): the server writes a NaN or an infinity as a string of NON_FINITE (JSON has
# no number for them). In other nested types (a STRUCT, a MAP) such a string is left as it came: it may be text.
_FLOAT_TYPES = frozenset({"DOUBLE", "FLOAT", "REAL", "FLOAT4", "FLOAT8"})
_FLOAT_LISTS = frozenset(f"{kind}[]" for kind in _FLOAT_TYPES)
_DECIMAL = re.compile(r"DECIMAL\(\d+,(\d+)\)")
_DECIMAL_DIGITS = decimal.Context(prec=40)  # DuckDB's widest DECIMAL has 38 digits


def _float(value: Any) -> Any:
    return NON_FINITE[value] if isinstance(value, str) and value in NON_FINITE else value


def _floats(value: Any) -> Any:
    return [_float(v) for v in value] if isinstance(value, list) else _float(value)


def _bytes(value: Any) -> Any:
    return base64.b64decode(value) if isinstance(value, str) else value


def _decimal(value: Any, scale: int) -> Any:
    """A DECIMAL as JSON carried it (a number when a float holds it exactly, else its digits: ``decimal_json``) back
    as the Decimal of the column's scale that a local file gives (``1.5`` in a DECIMAL(10,2) is ``1.50``)."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        return value
    try:
        exact = decimal.Decimal(repr(value) if isinstance(value, float) else value)
        return exact.quantize(decimal.Decimal(1).scaleb(-scale), context=_DECIMAL_DIGITS)
    except decimal.InvalidOperation:
        return value


def _reader(kind: str) -> Callable[[Any], Any] | None:
    """How to give back a value of DuckDB type ``kind`` as a local file's query gives it, from what the server
    wrote in JSON (bytes in base64, NaN and the infinities as text, times ISO 8601, decimals as numbers or
    digits); None when JSON carries the type as it is (or nothing is done for it: nested types keep their JSON)."""
    if kind == "BLOB":
        return _bytes
    if kind in _FLOAT_TYPES or kind in _FLOAT_LISTS:
        return _floats
    parse = FROM_JSON_TEXT.get(kind)
    if parse is not None:
        return lambda value: parse(value) if isinstance(value, str) else value
    decimal_type = _DECIMAL.fullmatch(kind)
    if decimal_type is not None:
        return functools.partial(_decimal, scale=int(decimal_type[1]))
    return None


def _typed_rows(rows: list[tuple[Any, ...]], types: list[str] | None) -> list[tuple[Any, ...]]:
    """``rows`` with each column whose type JSON does not carry (see ``_reader``) read back as that type."""
    readers = {index: reader for index, kind in enumerate(types or []) if (reader := _reader(kind)) is not None}
    if not readers:
        return rows
    typed = []
    for row in rows:
        values = list(row)
        for index, read in readers.items():
            if index < len(values) and values[index] is not None:
                values[index] = read(values[index])
        typed.append(tuple(values))
    return typed


def _error_text(body: bytes) -> str:
    """The server's explanation from an error body (JSON with error/message, or plain text)."""
    text = body.decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text
    if isinstance(data, dict):
        for key in ("error", "message", "detail"):
            if isinstance(data.get(key), str):
                return data[key]
    return text


class RemoteStore:
    """Queries a store through the server at ``http_url`` (e.g. ``http://127.0.0.1:4318``)."""

    def __init__(self, http_url: str, token: str | None = None, *, timeout: float = 60.0) -> None:
        self.url = http_url.rstrip("/")
        self.token = token
        self.timeout = timeout

    def __enter__(self) -> RemoteStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def is_alive(self, timeout: float = 2.0) -> bool:
        """Does a tracegrade server answer at this URL? Only an answer to /healthz that names tracegrade (its JSON
        ``server`` field, ``HEALTHZ_SERVER``) counts, or, from a receiver older than that field, a bare
        ``{"status": "ok"}`` whose /metrics page is a receiver's: another program on the port a killed server's
        sidecar still names (a web server answering 200 or 404, or no HTTP at all) is no server, and its store is
        then said to be held by its holder, as when nothing listens there."""
        healthz = self._page("/healthz", timeout)
        try:
            answer = json.loads(healthz) if healthz is not None else None
        except ValueError:
            return False
        if not isinstance(answer, dict):
            return False
        if "server" in answer:
            return answer["server"] == HEALTHZ_SERVER
        # a receiver from before ``server`` (one not yet restarted during an upgrade) answers {"status": "ok"}, as
        # many health checks do: its metrics page, which opens with the receiver's first series, tells them apart
        if answer.get("status") != "ok":
            return False
        metrics = self._page("/metrics", timeout)
        return metrics is not None and metrics.startswith(_RECEIVER_METRICS_START)

    def _page(self, path: str, timeout: float) -> bytes | None:
        """The first ``_HEALTHZ_MOST`` bytes of a 200 answer to GET ``path``; None for anything else (nothing
        listening, no HTTP, another status)."""
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=timeout) as response:
                return bytes(response.read(_HEALTHZ_MOST))
        except urllib.error.HTTPError as exc:  # a tracegrade server answers these 200; this is another program
            exc.close()
            return None
        except (OSError, ValueError, http.client.HTTPException):
            return None

    def query(
        self, sql: str, params: Sequence[Any] | None = None, *, control: QueryControl | None = None
    ) -> QueryResult:
        """Run one read-only statement on the server; errors come back as StoreError. Of ``control`` only
        ``max_rows`` applies here (the server's own limits stop the query)."""
        data = self._post("/v1/query", {"sql": sql, "params": list(params) if params is not None else []}, "query")
        try:
            columns = [str(c) for c in data["columns"]]
            rows = [tuple(r) for r in data["rows"]]
        except (KeyError, TypeError) as exc:
            raise StoreError(f"the tracegrade server at {self.url} sent an unexpected query answer: {exc}") from None
        types = data.get("types") if isinstance(data.get("types"), list) else None
        rows = _typed_rows(rows, types)  # bytes, NaN, times, decimals: as a local file gives them
        return self._capped(QueryResult(columns, rows, types), data, control.max_rows if control else None)

    def forget(self, trace_ids: Sequence[str], *, delete_runs: bool = False) -> Deleted:
        """Forget traces through the server (``POST /v1/forget``); its token decides whose."""
        document = {"trace_ids": list(trace_ids), "delete_runs": delete_runs}
        data = self._post("/v1/forget", document, "request to forget traces")
        try:
            return Deleted.from_dict(data["forgotten"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StoreError(f"the tracegrade server at {self.url} sent an unexpected answer: {exc!r}") from None

    def purge_deleted(self) -> Purged:
        """Have the server rewrite the store file it holds without the bytes of deleted rows (``POST /v1/purge``);
        its answer comes once the file is replaced, which on a large store takes a while (``self.timeout``)."""
        from tracegrade.store.file_purge import Purged  # it imports duckdb, which reading through a server does without

        data = self._post("/v1/purge", {}, "request to purge the store file")
        try:
            sizes = data["purged"]
            return Purged(int(sizes["bytes_before"]), int(sizes["bytes_after"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise StoreError(f"the tracegrade server at {self.url} sent an unexpected answer: {exc!r}") from None

    def rebuild(
        self, scope: RebuildScope, step: int | None
    ) -> Generator[RebuildStart | RebuiltStep | RebuildDone, None, None]:
        """Have the server map stored traces again (``POST /v1/rebuild``), yielding its progress as it comes: the
        start, each step committed, then the end. The server's account of why it ended early, or an answer cut
        short, is a StoreError; ``self.timeout`` bounds the wait for each line (a step), not the whole rebuild.
        Closing the iterator hangs up, which ends the rebuild after its step in progress."""
        from tracegrade.store.rebuild_progress import RebuildDone, read_progress_line

        document = {"all": scope.every, "tenant": scope.tenant, "batch": step}
        what = "request to rebuild trajectories"
        with self._posted("/v1/rebuild", document, what) as response:
            for line in response:
                try:
                    event = read_progress_line(line)
                except ValueError as exc:
                    raise StoreError(f"the tracegrade server at {self.url} sent an unexpected answer: {exc}") from None
                except StoreError as exc:  # the server's account of why the rebuild ended early
                    raise StoreError(f"the tracegrade server at {self.url} ended the rebuild: {exc}") from None
                yield event
                if isinstance(event, RebuildDone):
                    return
        raise StoreError(
            f"the tracegrade server at {self.url} did not finish its answer to the {what}: check that the server "
            "still runs, then try again"
        )

    def _post(self, path: str, document: dict[str, Any], what: str) -> Any:
        """POST ``document`` as JSON to ``path`` and return the JSON answer; errors come back as StoreError."""
        with self._posted(path, document, what) as response:
            return json.loads(response.read())

    @contextmanager
    def _posted(self, path: str, document: dict[str, Any], what: str) -> Iterator[http.client.HTTPResponse]:
        """POST ``document`` as JSON to ``path``; the answer, to read in the block. Errors, also those of reading
        it, come back as StoreError."""
        request = urllib.request.Request(
            f"{self.url}{path}",
            data=json.dumps(document, default=str).encode("utf-8"),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            method="POST",
        )
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                yield response
        except urllib.error.HTTPError as exc:
            detail = _error_text(exc.read())
            if exc.code == 401:  # a 403 (a token without the scope) says in its detail what to do
                raise StoreError(
                    f"the tracegrade server at {self.url} refused the {what} ({exc.code}: {detail}); "
                    "pass its token with --token or TRACEGRADE_TOKEN"
                ) from None
            # the detail says what failed (a refusal, or "query failed: <DuckDB's error>"): no second prefix
            raise StoreError(f"the tracegrade server at {self.url} answered {exc.code}: {detail}") from None
        except http.client.HTTPException as exc:  # e.g. a server killed while it answered
            raise StoreError(
                f"the tracegrade server at {self.url} did not answer the {what}: its answer was cut short or is not "
                f"HTTP ({exc!r}); check that the server still runs, then try again"
            ) from None
        except (OSError, ValueError) as exc:
            raise StoreError(f"the tracegrade server at {self.url} did not answer the {what}: {exc}") from None

    def _capped(self, result: QueryResult, answer: dict[str, Any], wanted: int | None) -> QueryResult:
        """``result`` cut to the ``wanted`` rows; a result the server cut is an error unless a cap was wanted."""
        server_cut = answer.get("truncated") is True
        server_cap = answer.get("max_rows") if server_cut else None
        byte_cap = answer.get("max_bytes") if server_cut else None
        if byte_cap is not None and wanted is None:
            raise StoreError(
                f"the result holds more than {byte_cap:,} bytes, the most the tracegrade server at {self.url} "
                "returns (its --query-max-bytes): narrow the query (WHERE, LIMIT, fewer or shorter columns), raise "
                "the server's --query-max-bytes, or stop the server and read the store file directly"
            )
        if server_cut and wanted is None:
            raise StoreError(
                f"the result has more than {server_cap} rows, the most the tracegrade server at {self.url} "
                "returns (its --query-max-rows): narrow the query (WHERE, LIMIT, fewer columns), raise the "
                "server's --query-max-rows, or stop the server and read the store file directly"
            )
        if wanted is None:
            return result
        caps = [cap for cap in (wanted, server_cap) if isinstance(cap, int)]
        result.truncated = server_cut or len(result.rows) > wanted
        result.rows = result.rows[:wanted]
        result.max_rows = min(caps)
        result.max_bytes = byte_cap if isinstance(byte_cap, int) and len(result.rows) < wanted else None
        return result

    def query_arrow(self, sql: str, params: Sequence[Any] | None = None) -> pa.Table:
        from tracegrade.store.arrow_types import typed_arrow

        # a result the server cut is refused (see ``_capped``); the columns get the types a local file gives them
        return typed_arrow(self.query(sql, params))

    def close(self) -> None:
        """Nothing to release (one HTTP request per query)."""
