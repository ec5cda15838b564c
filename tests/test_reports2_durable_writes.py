"""Report files are written durably: the new content is flushed to the disk (``fsync``) before it is renamed over the
old file, and the directory after the rename, so a power cut cannot leave an empty report; a process killed while
it writes leaves the old report or the new one whole; a full disk leaves no temporary file behind."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import orjson
import pytest

from tests.support.small_fs import fill, small_filesystem
from tracegrade.errors import OutputFileError
from tracegrade.output_files import replacing, write_text_file


def test_the_file_is_synced_before_the_rename_and_the_directory_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real system calls run; the order they ran in is noted (which inode each fsync was about)."""
    events: list[tuple[str, int]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        events.append(("fsync", os.fstat(fd).st_ino))
        real_fsync(fd)

    def replace(src: str | Path, dst: str | Path) -> None:
        events.append(("replace", os.stat(src).st_ino))
        real_replace(src, dst)

    target = tmp_path / "out" / "report.json"
    target.parent.mkdir()
    target.write_text("old", encoding="utf-8")
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    write_text_file(target, "new")
    monkeypatch.undo()
    new_file, directory = target.stat().st_ino, target.parent.stat().st_ino
    assert events == [("fsync", new_file), ("replace", new_file), ("fsync", directory)]
    assert target.read_text(encoding="utf-8") == "new"


_WRITER = textwrap.dedent(
    """
    import sys
    from tests.support.large_reports import large_report
    from tracegrade.output_files import write_text_file
    from tracegrade.reporters import JSONReporter

    target = sys.argv[1]
    texts = [JSONReporter().render(large_report(n)) for n in (800, 900)]
    print("ready", flush=True)
    i = 0
    while True:  # until killed: the report written over and over, alternately with 800 and 900 cases
        with open(target + ".count", "w") as note:
            note.write(str(i))
        write_text_file(target, texts[i % 2])
        i += 1
    """
)


def _writes_begun(count: Path) -> int:
    """How many writes the writer has begun: its note, read once (the writer truncates it before each number, so a
    read may find it empty: none counted yet)."""
    try:
        text = count.read_text()
    except FileNotFoundError:
        return 0
    return int(text) if text else 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_writer_killed_at_a_random_point_leaves_a_whole_report(tmp_path: Path, seed: int) -> None:
    target = tmp_path / "report.json"
    rng = random.Random(seed)
    writer = subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(target)],
        cwd=Path(__file__).resolve().parents[1],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "ready\n"
        # kill once it has got somewhere: after a random number of writes have begun, at a random moment of one
        writes = rng.randint(1, 4)
        count = Path(f"{target}.count")
        while _writes_begun(count) < writes:
            assert writer.poll() is None
            time.sleep(0.01)
        time.sleep(rng.uniform(0, 0.05))
        os.kill(writer.pid, signal.SIGKILL)
    finally:
        writer.kill()
        writer.wait()
    data = orjson.loads(target.read_bytes())  # whole: the old report or the new one, never a part of either
    assert len(data["results"]) in (800, 900)
    # the temporary file of a write cut short stays (no process is left to remove it), hidden beside the report;
    # it never stands in for the report
    leftovers = [p.name for p in tmp_path.iterdir() if p.name not in ("report.json", "report.json.count")]
    assert all(name.startswith(".report.json.") and name.endswith(".tmp") for name in leftovers), leftovers


def test_a_full_disk_leaves_the_old_report_and_no_temporary_file(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("mounting a small tmpfs needs root")
    with small_filesystem(tmp_path / "small", "1m") as mount:
        target = mount / "report.json"
        target.write_text('{"old": true}', encoding="utf-8")
        fill(mount, leave=4096)
        with pytest.raises(OutputFileError, match=r"No space left on device"):
            write_text_file(target, "x" * (512 * 1024))
        with pytest.raises(OutputFileError, match=r"No space left on device"), replacing(target) as fh:
            for _ in range(64):  # a streaming writer
                fh.write(b"y" * 16384)
        assert target.read_text(encoding="utf-8") == '{"old": true}'
        assert sorted(p.name for p in mount.iterdir()) == [".filler", "report.json"]
