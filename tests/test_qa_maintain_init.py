"""``tracegrade init`` where the project cannot be written: a clean error naming the file and the reason, and
nothing left behind, so that the same command runs again once the cause is gone (a half-written project made
the directory "not empty", and the retry was refused); a directory named like a README slot keeps its name.

The file-size limit (``RLIMIT_FSIZE``, what a full disk looks like to a writer: the write fails part-way) is
set in a real ``tracegrade init`` process, so the test needs no privileges to fill or mount a disk."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli

pytest.importorskip("resource")

# agent.py (1,345 bytes) fits under the limit, eval_set.json (2,084 bytes) does not: the run fails part-way
SIZE_LIMITED = (
    "import resource, signal, sys; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
    "resource.setrlimit(resource.RLIMIT_FSIZE, (1500, 1500)); "
    "from tracegrade.cli.main import main; sys.argv = ['tracegrade', 'init', sys.argv[1]]; main()"
)


def _init_size_limited(directory: Path) -> subprocess.CompletedProcess[str]:
    # -B: under the limit, the .pyc files Python writes for its imports would be cut short, not refused, and every
    # later process importing those modules would fail on them ("marshal data too short")
    return subprocess.run(
        [sys.executable, "-B", "-c", SIZE_LIMITED, str(directory)], capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("exists", [False, True], ids=["new-directory", "empty-directory"])
def test_a_write_that_fails_part_way_leaves_nothing_and_the_retry_succeeds(tmp_path: Path, exists: bool) -> None:
    project = tmp_path / "nested" / "demo"
    if exists:
        project.mkdir(parents=True)

    failed = _init_size_limited(project)

    assert failed.returncode == 2, failed.stdout + failed.stderr
    assert "Traceback" not in failed.stderr
    assert f"cannot write {project / 'eval_set.json'}: File too large" in failed.stderr
    assert "nothing of the project was left behind" in failed.stderr
    if exists:
        assert list(project.iterdir()) == []  # the directory the user made stays, empty
    else:
        assert not (tmp_path / "nested").exists()  # the directories init made are gone too
    retried = CliRunner().invoke(cli, ["init", str(project)])
    assert retried.exit_code == 0, retried.output
    assert len(list(project.iterdir())) == 6


def test_a_directory_that_cannot_be_made_is_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("mine")
    result = CliRunner().invoke(cli, ["init", str(tmp_path / "a-file" / "demo")])
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert f"cannot write {tmp_path / 'a-file' / 'demo' / 'agent.py'}: Not a directory" in result.output
    assert (tmp_path / "a-file").read_text() == "mine"


def test_a_directory_named_like_a_readme_slot_keeps_its_name(tmp_path: Path) -> None:
    project = tmp_path / "{extra} bot"
    assert CliRunner().invoke(cli, ["init", str(project)]).exit_code == 0
    assert (project / "README.md").read_text().splitlines()[0] == "# {extra} bot: agent evaluations with tracegrade"
