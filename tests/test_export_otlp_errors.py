"""`tracegrade export --format otlp|otlp-json`: its selections through the command line, and its refusals: an
unknown format, options of the other format, a bad trace id or time range, an output it cannot write, and a disk
that fills up during the export, which leaves nothing under the output's name (an earlier file there is kept)."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.grading_cli import run_cli
from tests.support.small_fs import fill, small_filesystem
from tracegrade.models.span import LogRecordData, SpanRecord
from tracegrade.store.prepared import prepare_write
from tracegrade.store.trace_store import TraceStore

_BASE = 1_760_000_000_000_000_000  # 2025-10-09T08:53:20Z
TRACES = 40
SPANS_PER_TRACE = 50


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """2,000 spans of 40 traces (a trace a second from _BASE), each with 1 KB of random text (gzip cannot shrink
    it much): a few MB exported."""
    noise = random.Random(7)
    path = tmp_path_factory.mktemp("export-otlp-errors") / "store.duckdb"
    spans = [
        SpanRecord(
            trace_id=f"{trace + 1:032x}",
            span_id=f"{trace * SPANS_PER_TRACE + n + 1:016x}",
            name=f"span {n}",
            start_ns=_BASE + trace * 1_000_000_000 + n,
            end_ns=_BASE + trace * 1_000_000_000 + n + 10,
            attributes={"payload": noise.randbytes(500).hex()},
            resource={"service.name": "svc"},
        )
        for trace in range(TRACES)
        for n in range(SPANS_PER_TRACE)
    ]
    logs = [
        LogRecordData(time_ns=_BASE + trace * 1_000_000_000, trace_id=f"{trace + 1:032x}") for trace in range(TRACES)
    ]
    with TraceStore(path) as opened:
        opened.write_batch([prepare_write(spans, logs, "default")])
    return path


def _export(store: Path, *args: str | Path) -> tuple[int, str, str]:
    result = run_cli("export", "--store", store, *args)
    return result.exit_code, result.stdout, result.stderr


def _trace_ids(path: Path) -> set[str]:
    return {
        span["traceId"]
        for line in path.read_text(encoding="utf-8").splitlines()
        for block in json.loads(line).get("resourceSpans", [])
        for scope in block["scopeSpans"]
        for span in scope["spans"]
    }


def test_trace_ids_and_a_time_range_select_the_exported_spans(store: Path, tmp_path: Path) -> None:
    chosen = tmp_path / "chosen.jsonl"
    code, out, err = _export(
        store, "--format", "otlp-json", "-o", chosen, "--trace-id", f"{3:032X}", "--trace-id", f"{7:032x}"
    )
    assert code == 0, err
    assert _trace_ids(chosen) == {f"{3:032x}", f"{7:032x}"}
    assert f"{2 * SPANS_PER_TRACE} spans and 2 log records" in out
    window = tmp_path / "window.jsonl"
    # traces 10..19 started in [_BASE + 10 s, _BASE + 20 s)
    code, out, err = _export(
        store,
        "--format",
        "otlp-json",
        "-o",
        window,
        "--since",
        "2025-10-09T08:53:30Z",
        "--until",
        "2025-10-09T08:53:40Z",
    )
    assert code == 0, err
    assert _trace_ids(window) == {f"{trace + 1:032x}" for trace in range(10, 20)}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--format", "csv"), "'csv' is not one of 'parquet', 'otlp', 'otlp-json'"),
        (("--format", "otlp", "--table", "spans"), "--table applies to --format parquet"),
        (("--trace-id", f"{1:032x}"), "--trace-id selects spans and log records for --format otlp or otlp-json"),
        (("--format", "otlp", "--trace-id", "xyz"), "--trace-id 'xyz' is not a trace id: give its 32 hex digits"),
        (("--format", "otlp", "--since", "yesterday"), "cannot read --since 'yesterday'"),
        (("--format", "otlp", "--since", "1h", "--until", "2h"), "--since '1h' is not before --until '2h'"),
    ],
)
def test_a_bad_option_is_refused_with_what_to_give(
    store: Path, tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    output = tmp_path / "out.otlp"
    code, _, err = _export(store, "-o", output, *args)
    assert code == 2, err
    assert message in err and "Traceback" not in err
    assert not output.exists()


def test_parquet_cannot_go_to_standard_output(store: Path) -> None:
    code, _, err = _export(store, "-o", "-")
    assert code == 2 and "--format parquet writes a directory of files" in err


@pytest.mark.parametrize("fmt", ["otlp", "otlp-json"])
def test_an_output_that_cannot_be_written_is_refused_with_its_path_and_reason(
    store: Path, tmp_path: Path, fmt: str
) -> None:
    (tmp_path / "afile").write_text("keep", encoding="utf-8")
    code, _, err = _export(store, "--format", fmt, "-o", tmp_path / "afile" / "out")
    assert code == 2 and f"cannot write {tmp_path / 'afile' / 'out'}: Not a directory" in err
    (tmp_path / "adir").mkdir()
    code, _, err = _export(store, "--format", fmt, "-o", tmp_path / "adir")
    assert code == 2 and f"cannot write {tmp_path / 'adir'}: it is a directory, not a regular file" in err
    code, _, err = _export(store, "--format", fmt, "-o", store)
    assert code == 2 and f"it is the input file {store}" in err
    assert (tmp_path / "afile").read_text(encoding="utf-8") == "keep"


def test_a_missing_store_makes_no_output(tmp_path: Path) -> None:
    code, _, err = _export(tmp_path / "nosuch.duckdb", "--format", "otlp", "-o", tmp_path / "out.otlp")
    assert code == 2 and "store not found" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mounts a tmpfs (CI runs as root on Linux)")
@pytest.mark.parametrize("name", ["out.otlp", "out.jsonl.gz"])
def test_a_full_disk_leaves_nothing_under_the_output_name(store: Path, tmp_path: Path, name: str) -> None:
    with small_filesystem(tmp_path / "small", "1m") as mount:
        output = mount / name
        output.write_bytes(b"an earlier export")
        fill(mount, leave=64 * 1024)
        code, _, err = _export(store, "--format", "otlp-json" if "json" in name else "otlp", "-o", output)
        assert code == 2, err
        assert f"cannot write {output}: No space left on device" in err and "Traceback" not in err
        assert output.read_bytes() == b"an earlier export"
        assert sorted(path.name for path in mount.iterdir()) == [".filler", name]  # no temporary file left


def _export_to(stdout_path: Path, store: Path) -> subprocess.CompletedProcess[str]:
    launch = "from tracegrade.cli.main import main; main()"
    with open(stdout_path, "wb") as stdout:
        return subprocess.run(
            [sys.executable, "-c", launch, "export", "--store", str(store), "--format", "otlp", "-o", "-"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=300,
        )


def _refused_by_name(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 2, done.stderr
    assert "cannot write standard output: No space left on device" in done.stderr and "Traceback" not in done.stderr


def test_standard_output_on_a_full_device_is_refused_by_name(store: Path) -> None:
    """A real process whose standard output is /dev/full (every write: no space left on device)."""
    _refused_by_name(_export_to(Path("/dev/full"), store))


def test_standard_output_on_a_full_disk_is_refused_by_name(store: Path, tmp_path: Path) -> None:
    """Redirected to a file on a nearly full file system, a write to standard output stops short without an
    error (the rest was dropped, and the export ended with exit 0 and a cut file)."""
    with small_filesystem(tmp_path / "small", "1m") as mount:
        fill(mount, leave=64 * 1024)
        _refused_by_name(_export_to(mount / "out.otlp", store))
