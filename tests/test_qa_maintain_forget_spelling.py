"""`tracegrade forget` given a trace id as other tools show it (a UUID with dashes, ``0x``, braces): refused,
naming the id as the store keeps it, and nothing forgotten. Before, it was forgotten as given: "forgot 0
trace(s)", exit 0, and the trace the operator meant stayed in the store (and its late spans would be stored).
A trace id stored in that very form (written through the Python API) is still forgotten as given."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TraceStore

from .support.store_records import make_span, trace_hex

TRACE = 0x71DC091D1E6198FF4ADF4F7B6A1D5D87
STORED_UUID = "0f0e0d0c-0b0a-0908-0706-050403020100"  # a trace id kept as written by a Python caller


def _run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "store.duckdb"
    odd = make_span(1, 2, name="agent")
    odd.trace_id = STORED_UUID
    with TraceStore(path) as store:
        written = store.write([make_span(TRACE, 1, name="agent"), odd])
        store.rebuild_trajectories(written.trace_ids)
    return path


def _stored(path: Path) -> tuple[set[str], set[str]]:
    """The stored traces' ids, and the forgotten ones."""
    with TraceStore(path, read_only=True) as store:
        spans = {row[0] for row in store.query("SELECT DISTINCT trace_id FROM spans").rows}
        forgotten = {row[0] for row in store.query("SELECT trace_id FROM forgotten_traces").rows}
    return spans, forgotten


@pytest.mark.parametrize(
    "given",
    [
        "71dc091d-1e61-98ff-4adf-4f7b6a1d5d87",
        "0x71dc091d1e6198ff4adf4f7b6a1d5d87",
        "{71DC091D-1E61-98FF-4ADF-4F7B6A1D5D87}",
    ],
    ids=["uuid", "0x", "braces"],
)
def test_a_trace_id_spelled_as_other_tools_show_it_is_refused_naming_the_stored_form(
    store_path: Path, given: str
) -> None:
    code, out, err = _run("forget", "--store", store_path, given)

    assert code == 2, out
    assert f"{given!r} is a trace id written as another tool shows it" in err
    assert f"give it as {trace_hex(TRACE)}. Nothing was forgotten" in err
    assert _stored(store_path) == ({trace_hex(TRACE), STORED_UUID}, set())


def test_a_trace_id_stored_in_that_form_is_forgotten_as_given(store_path: Path) -> None:
    code, out, err = _run("forget", "--store", store_path, STORED_UUID)

    assert code == 0, out + err
    assert "forgot 1 trace(s)" in out
    assert _stored(store_path) == ({trace_hex(TRACE)}, {STORED_UUID})
