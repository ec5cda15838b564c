"""``report -o /dev/stdout`` with standard output a pipe (``… | head``) is refused as the FIFO it is, as ``-o`` refuses
any FIFO. Before, the path's real name (``/proc/self/fd/pipe:[N]``, which is no file) was taken for a new file to
create, and the command failed with "No such file or directory (/proc/<pid>/fd/.pipe:[N]….tmp)".

A real process whose standard output is a real pipe; a real file for the shell's ``> file`` (written through)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tracegrade.models.results import EvalCaseResult, EvalReport
from tracegrade.reporters import JSONReporter

_LAUNCH = "from tracegrade.cli.main import main; main()"


def _saved_report(tmp_path: Path) -> Path:
    report = EvalReport.create("pipe", [EvalCaseResult(eval_id="c1", passed=True, actual_response="ok")])
    JSONReporter.quick_save(report, tmp_path / "in.json")
    return tmp_path / "in.json"


def test_report_o_dev_stdout_on_a_pipe_is_refused_as_a_fifo(tmp_path: Path) -> None:
    source = _saved_report(tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCH, "report", str(source), "-f", "html", "-o", "/dev/stdout"],
        capture_output=True,  # standard output: a pipe
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert "cannot write /dev/stdout: it is a FIFO (named pipe), not a regular file" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_report_o_dev_stdout_on_a_file_writes_that_file(tmp_path: Path) -> None:
    source = _saved_report(tmp_path)
    with open(tmp_path / "out.json", "wb") as stdout:
        done = subprocess.run(
            [sys.executable, "-c", _LAUNCH, "report", str(source), "-f", "json", "-o", "/dev/stdout"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out.json").read_bytes() == source.read_bytes()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.json", "out.json"]  # no temporary file left
