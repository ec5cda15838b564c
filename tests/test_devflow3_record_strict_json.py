"""A run recorded through ``tracegrade serve`` (``POST /v1/runs``) travels as strict JSON: a score that is not a
number (NaN) is ``null`` on the wire, as in every report tracegrade writes, and is NaN again once recorded.

A real ``tracegrade serve`` process; the test reads the request on its way there through a loopback relay (bytes
passed on unchanged) and reads the run back through the server."""

from __future__ import annotations

import json
import math
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server_process import ServerProcess
from tracegrade.cli.grading_store import GradingStore
from tracegrade.models.results import CriterionResult, EvalCaseResult, EvalReport
from tracegrade.store import RemoteStore, TraceStore


class _Relay:
    """A loopback TCP relay to ``upstream`` keeping the requests clients sent. One request a connection, as
    urllib sends it (``Connection: close``): the request is read whole and passed on, then the answer back."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.sent: list[bytes] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:  # closed
                return
            with client, socket.create_connection(self.upstream) as server:
                request = b""
                while not _complete(request) and (data := client.recv(65536)):
                    request += data
                self.sent.append(request)
                server.sendall(request)
                while data := server.recv(65536):
                    client.sendall(data)

    def close(self) -> None:
        self._listener.close()


def _complete(request: bytes) -> bool:
    head, found, body = request.partition(b"\r\n\r\n")
    if not found:
        return False
    length = next(
        (int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")),
        0,
    )
    return len(body) >= length


@pytest.fixture
def server(tmp_path: Path) -> Iterator[ServerProcess]:
    store = tmp_path / "runs.duckdb"
    TraceStore(store).close()
    process = ServerProcess(store).start()
    try:
        yield process
    finally:
        process.terminate()


def _strict(text: bytes) -> object:
    def refuse(constant: str) -> object:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_a_nan_score_goes_to_the_server_as_null_and_is_recorded_as_nan(server: ServerProcess) -> None:
    unknown = CriterionResult(criterion="judge", score=float("nan"), threshold=0.5, passed=False)
    case = EvalCaseResult(eval_id="c1", passed=False, criterion_results=[unknown], duration_seconds=float("inf"))
    report = EvalReport(eval_set_id="nan-set", results=[case])
    relay = _Relay(("127.0.0.1", server.http_port))
    try:
        run_id = GradingStore(reader=None, sink=None, remote_url=relay.url).record(report, "eval_set", "nan-run")
    finally:
        relay.close()
    assert run_id == "nan-run"
    (request,) = [r for r in relay.sent if r.startswith(b"POST /v1/runs ")]
    body = _strict(request.partition(b"\r\n\r\n")[2])
    sent_case = body["report"]["results"][0]  # type: ignore[index]
    assert sent_case["criterion_results"][0]["score"] is None and sent_case["duration_seconds"] is None
    # as recorded: read back through the server that holds the file
    rows = RemoteStore(server.http_url).query("SELECT run_id, eval_set_id, total_cases FROM eval_runs").rows
    assert [tuple(row) for row in rows] == [("nan-run", "nan-set", 1)]
    (score,) = RemoteStore(server.http_url).query("SELECT score FROM eval_results WHERE run_id = 'nan-run'").rows
    assert math.isnan(score[0])  # null on the wire, NaN in the report the server read, as in a report file
