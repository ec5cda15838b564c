"""A file is read at the size it has, never at its kind's limit: a read of n bytes allocates n bytes first, and a
report's limit is 4 GiB, so reading every report at the limit failed with MemoryError where memory is not
overcommitted (or an address-space limit is set). A file larger than its limit is refused as before."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest

from tests.support.reporters_samples import sample_report
from tracegrade.errors import FileFormatError
from tracegrade.models import file_text
from tracegrade.models.file_text import MAX_REPORT_BYTES, read_json_file

_MIB = 1024 * 1024


def test_a_small_report_is_read_without_reserving_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    sample_report().to_file(path)
    tracemalloc.start()
    try:
        report = read_json_file(path, "report", strict=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report["eval_set_id"] == sample_report().eval_set_id
    assert peak < 16 * _MIB  # the whole read, parse included; reading at the limit reserved 4 GiB


def _address_space_of_2_gib() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def test_report_works_within_an_address_space_smaller_than_the_limit(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    sample_report().to_file(path)
    done = subprocess.run(  # a process of its own: the limit would bind this one too
        [sys.executable, "-c", "from tracegrade.cli.main import cli; cli()", "report", str(path), "-f", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_address_space_of_2_gib,
    )
    assert done.returncode == 0, done.stderr
    assert "MemoryError" not in done.stderr and done.stdout.startswith("{")


def test_a_report_larger_than_the_limit_is_refused_as_before(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    with path.open("wb") as handle:  # sparse: no disk space taken, and refused before any byte is read
        handle.truncate(MAX_REPORT_BYTES + 1)
    with pytest.raises(FileFormatError) as refused:
        read_json_file(path, "report", strict=False)
    assert refused.value.problems == [
        (
            "$",
            "the file is 4,096.0 MiB, larger than the 4,096 MiB tracegrade reads; check that this is the file meant, "
            "or split it into smaller files",
        )
    ]


def test_a_file_that_tells_no_size_is_read_to_its_end_in_chunks() -> None:
    # /proc/sys says size 0, holds more, and refuses (ENOMEM) a read of 4 MiB or more, as the limit's was
    ostype = Path("/proc/sys/kernel/ostype")
    if not ostype.is_file():
        pytest.skip("no /proc/sys on this system")
    assert os.stat(ostype).st_size == 0
    expected = ostype.read_text().strip()
    assert read_json_file(ostype, "file", as_yaml=True) == expected


def test_a_file_larger_than_fstat_said_is_still_cut_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    ostype = Path("/proc/sys/kernel/ostype")
    if not ostype.is_file():
        pytest.skip("no /proc/sys on this system")
    monkeypatch.setattr(file_text, "MAX_FILE_BYTES", 2)  # the text ("Linux\n") is longer than that
    with pytest.raises(FileFormatError) as refused:
        read_json_file(ostype, "file", as_yaml=True)
    # read one byte past the limit, its size is unknown: not "the file is 0.0 MiB, larger than the 0 MiB" (qa14)
    assert refused.value.problems[0][1].startswith(
        "the file holds more than the 0 MiB tracegrade reads (it grew while it was read"
    )
