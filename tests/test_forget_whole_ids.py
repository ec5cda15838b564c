"""`tracegrade forget` given the beginning of a trace id (as `show` takes one): refused, naming the whole id, on a
file opened directly and through a running server; a whole id of nothing stored is still forgotten."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TraceStore

from .support.store_records import make_span, trace_hex


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    with TraceStore(path) as store:
        written = store.write([make_span(0xABC1, 1, name="agent"), make_span(0xABC2, 2, name="agent")])
        store.rebuild_trajectories(written.trace_ids)
    return path


def stored_traces(path: Path) -> set[str]:
    with TraceStore(path, read_only=True) as store:
        return {row[0] for row in store.query("SELECT DISTINCT trace_id FROM spans").rows}


def test_the_beginning_of_a_trace_id_is_refused_naming_the_trace_and_nothing_is_forgotten(store_path: Path) -> None:
    prefix = trace_hex(0xABC1)[:-1]  # the beginning of both traces' ids
    for extra in ((), ("--dry-run",)):
        code, out, err = run("forget", "--store", store_path, prefix, *extra)
        assert code == 2, out
        assert f"{prefix!r} is not a stored trace's id but the beginning of {trace_hex(0xABC1)}" in err
        assert "give the whole id" in err and "Nothing was forgotten" in err
    with TraceStore(store_path, read_only=True) as store:
        assert store.query("SELECT count(*) FROM forgotten_traces").rows == [(0,)]
    assert stored_traces(store_path) == {trace_hex(0xABC1), trace_hex(0xABC2)}


def test_whole_ids_are_forgotten_whether_stored_or_not_yet(store_path: Path) -> None:
    code, out, err = run("forget", "--store", store_path, trace_hex(0xABC1), trace_hex(0xABC9), "not-hex-id")
    assert code == 0, out + err
    assert "forgot 1 trace(s)" in out
    assert stored_traces(store_path) == {trace_hex(0xABC2)}
    with TraceStore(store_path, read_only=True) as store:
        forgotten = {row[0] for row in store.query("SELECT trace_id FROM forgotten_traces").rows}
    assert forgotten == {trace_hex(0xABC1), trace_hex(0xABC9), "not-hex-id"}


def test_through_a_running_server_the_beginning_of_an_id_is_refused_too(store_path: Path) -> None:
    from .support.server_process import ServerProcess

    with ServerProcess(store_path, extra_args=("--token", "s3cret-token-long-enough")):
        code, out, err = run(
            "forget", "--store", store_path, "--token", "s3cret-token-long-enough", trace_hex(0xABC2)[:-1]
        )
        assert code == 2, out
        assert "is not a stored trace's id but the beginning of" in err and trace_hex(0xABC1) in err
    assert stored_traces(store_path) == {trace_hex(0xABC1), trace_hex(0xABC2)}
