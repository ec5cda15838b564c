"""Two ``tracegrade worker`` processes given one ``--worker-id`` (two replicas deployed with the same fixed id).

Leases are keyed by the worker's id, and a worker hands back the leases of its id when it starts (a restarted
worker's). Before, on a lake, the second process of an id handed back the jobs the first one was grading and graded
them again (three of twelve jobs graded and recorded twice, in a run by hand), and the first one finished the jobs
the second one had claimed. Now one running process holds an id (a lock in the lake's catalog database): a second
one is refused at start (exit 2, saying who holds the id), and the id is free again as soon as its process dies, so
a worker restarted with it hands back and grades the killed one's jobs at once. On a store file the second process
never starts grading: the file has one writer, a ``tracegrade serve`` or the first worker.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import pg_cluster
from tests.support.grading_slow_criterion import write_slow_rules
from tests.support.pg_cluster import PgServer
from tests.support.server_process import ServerProcess
from tests.support.server_requests import query, send_span
from tests.support.store_records import make_span, trace_hex
from tests.support.waiting import wait_for_value, wait_until
from tests.support.worker_process import LAUNCH, REPO, WorkerProcess
from tracegrade.errors import StoreError, WorkerIdInUseError
from tracegrade.store import TraceStore
from tracegrade.store.lake import LakeStore
from tracegrade.store.lake_location import catalog_conninfo

pg_server = pg_cluster.pg_server  # the session's PostgreSQL (a fixture)

TRACES = [1, 2, 3, 4, 5, 6]
ID = "grader"
IN_USE = f"grading worker id {ID!r} is in use on the lake"


@pytest.fixture
def lake(pg_server: PgServer, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A lake holding ``TRACES``, mapped: ``(location, data path)``."""
    location, data = f"ducklake:postgres:{pg_server.new_database()}", tmp_path / "lake-data"
    with LakeStore(location, data_path=data) as store:
        attributes = {"gen_ai.operation.name": "invoke_agent", "output.value": "refund sent"}
        store.write([make_span(trace, trace * 10, name="agent", attributes=attributes) for trace in TRACES])
        store.rebuild_trajectories([trace_hex(trace) for trace in TRACES])
    yield location, data


def _lake_rows(location: str, sql: str) -> list[tuple]:
    with LakeStore(location, read_only=True) as reader:
        return [tuple(row) for row in reader.query(sql).rows]


def _gradings(markers: Path) -> dict[str, list[int]]:
    """Per trace, the pid of each process that began grading it (the slow criterion's marker lines)."""
    return {
        marker.name.removesuffix(".started"): [int(pid) for pid in marker.read_text().split()]
        for marker in markers.iterdir()
    }


def _graded_by_another(markers: Path, pid: int) -> Callable[[], bool]:
    """Whether a process other than ``pid`` began grading any trace."""
    return lambda: any(grader != pid for graders in _gradings(markers).values() for grader in graders)


def _second_worker(store: str | Path, rules: Path, *extra: str) -> subprocess.Popen[str]:
    """``tracegrade worker --worker-id ID`` on ``store`` beside the first one, its output piped."""
    command = ["worker", "--rules", str(rules), "--store", str(store), "--worker-id", ID, *extra]
    return subprocess.Popen(
        [sys.executable, "-c", LAUNCH, *command],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _refused(second: subprocess.Popen[str], grading_elsewhere: Callable[[], bool]) -> str:
    """The output of ``second``, which must stop at start with exit 2 rather than grade (``grading_elsewhere``)."""
    wait_until(
        lambda: second.poll() is not None or grading_elsewhere(),
        "the second worker of the id to stop or to grade",
        120,
    )
    if second.poll() is None:
        second.kill()
    output = second.communicate(timeout=30)[0]
    assert second.returncode == 2, output
    return output


def test_a_second_worker_of_a_running_workers_id_is_refused_and_the_id_is_free_once_that_one_was_killed(
    lake: tuple[str, Path], tmp_path: Path
) -> None:
    location, data = lake
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    # leases of an hour never run out here: a job graded by two processes was handed back, or finished by another
    rules = write_slow_rules(tmp_path / "rules.yaml", markers, 600, lease_seconds=3600, batch_size=3, release=release)
    lake_args = ("--lake-data", str(data), "--worker-id", ID)
    with WorkerProcess(rules, location, tmp_path / "first.log", *lake_args) as first:
        wait_until(lambda: any(markers.iterdir()), "the first worker's first batch", 120)
        held = _lake_rows(location, f"SELECT job_id FROM grading_jobs WHERE owner = '{ID}' AND status = 'leased'")
        assert len(held) == 3
        first_pid = first.process.pid  # type: ignore[union-attr]
        for extra in ([], ["--once"]):
            second = _second_worker(location, rules, "--lake-data", str(data), *extra)
            output = _refused(second, _graded_by_another(markers, first_pid))
            assert IN_USE in output and "connected from" in output and "--worker-id" in output, output
        # the first worker's jobs are as they were: none handed back, none graded by another process
        assert sorted(
            _lake_rows(location, "SELECT job_id, owner, attempts, error FROM grading_jobs WHERE status = 'leased'")
        ) == sorted((job_id, ID, 1, None) for (job_id,) in held)
        started = _gradings(markers)  # the batch's first job, which hangs until released
        assert list(started.values()) == [[first_pid]]
        first.process.kill()  # type: ignore[union-attr]  # in the middle of its batch: nothing of it recorded
        first.process.wait(30)  # type: ignore[union-attr]

    release.touch()
    # restarted with the id: it is free (the killed process's connection closed), and the killed one's jobs, handed
    # back at once, are graded now rather than in an hour
    with WorkerProcess(rules, location, tmp_path / "restarted.log", *lake_args) as restarted:
        wait_for_value(
            lambda: _lake_rows(location, "SELECT status, count(*) FROM grading_jobs GROUP BY ALL"),
            [("done", len(TRACES))],
            "every job done by the restarted worker",
            timeout=180,
        )
        restarted_pid = restarted.process.pid  # type: ignore[union-attr]
        assert restarted.stop() == 0, restarted.output()

    # every job recorded exactly once: one write of one case each (the lake keeps every write it was given)
    assert _lake_rows(location, "SELECT count(*), count(DISTINCT eval_id) FROM raw.eval_case_results") == [
        (len(TRACES), len(TRACES))
    ]
    assert _lake_rows(location, "SELECT count(*), sum(attempts) FROM grading_jobs WHERE status = 'done'") == [
        (len(TRACES), len(TRACES))
    ]
    assert _gradings(markers) == {
        trace_hex(trace): ([first_pid] if trace_hex(trace) in started else []) + [restarted_pid] for trace in TRACES
    }


def test_the_id_of_a_worker_whose_catalog_connection_was_lost_can_be_taken_and_it_then_waits(
    lake: tuple[str, Path], pg_server: PgServer
) -> None:
    location, data = lake
    with LakeStore(location, data_path=data) as one, LakeStore(location, data_path=data) as other:
        one.job_queue().hold_worker_id(ID)
        one.job_queue().hold_worker_id(ID)  # still its own: nothing changes
        with pytest.raises(WorkerIdInUseError, match=f"{IN_USE}.*connected from .* since .* UTC"):
            other.job_queue().hold_worker_id(ID)
        # the session holding the id ends (a restart of PostgreSQL, an administrator): its lock goes with it
        database = catalog_conninfo(location).rsplit("dbname=", 1)[1].split()[0]
        ended = pg_server.psql(
            "SELECT count(pg_terminate_backend(l.pid)) FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
            f"WHERE l.locktype = 'advisory' AND d.datname = '{database}'"
        )
        assert ended.strip() == "1", ended
        other.job_queue().hold_worker_id("another-id")  # other ids are free all along
        other.job_queue().hold_worker_id(ID)
        with pytest.raises(StoreError):  # the first to notice its connection is gone
            one.job_queue().hold_worker_id(ID)
        with pytest.raises(WorkerIdInUseError):  # and it may not take the id back while the other holds it
            one.job_queue().hold_worker_id(ID)
    with LakeStore(location, data_path=data) as again:  # closing the stores let go of every id
        again.job_queue().hold_worker_id(ID)


def test_on_a_store_file_a_second_worker_of_an_id_never_starts_grading(tmp_path: Path) -> None:
    path = tmp_path / "store.duckdb"
    markers, release = tmp_path / "markers", tmp_path / "release"
    markers.mkdir()
    rules = write_slow_rules(tmp_path / "rules.yaml", markers, 600, lease_seconds=3600, batch_size=3, release=release)
    with ServerProcess(path) as server:
        traces = [send_span(server.http_url) for _ in range(4)]
        wait_for_value(
            lambda: query(server.http_url, "SELECT count(*) FROM traces")[0][0],
            len(traces),
            "every trace mapped by the server",
            60,
        )
        # while the server holds the file no `tracegrade worker` grades it: grading there is `serve --worker-rules`
        output = _refused(_second_worker(path, rules, "--once"), lambda: any(markers.iterdir()))
        assert "held by another process" in output and "--worker-rules" in output, output
        assert server.terminate() == 0, server.log()
    with WorkerProcess(rules, path, tmp_path / "first.log", "--worker-id", ID) as first:
        wait_until(lambda: any(markers.iterdir()), "the first worker's first batch", 120)
        first_pid = first.process.pid  # type: ignore[union-attr]
        for extra in ([], ["--once"]):
            output = _refused(_second_worker(path, rules, *extra), _graded_by_another(markers, first_pid))
            assert f"held by another process (pid {first_pid})" in output, output
        release.touch()
        wait_until(lambda: len(_gradings(markers)) == len(traces), "every trace graded", 120)
        assert first.stop() == 0, first.output()
    with TraceStore(path, read_only=True) as reader:
        jobs = reader.query("SELECT status, attempts, count(*) FROM grading_jobs GROUP BY ALL").rows
        assert [tuple(row) for row in jobs] == [("done", 1, len(traces))]
    assert _gradings(markers) == {trace: [first_pid] for trace in traces}
