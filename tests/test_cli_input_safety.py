"""The CLI refuses bad input with a precise message (exit 2), never a traceback, and harms no file.

Durations and times out of range, a date where a duration is expected, paths that cannot be written (a
directory under a regular file, /proc), outputs that are FIFOs, symlinks or the command's own input, an
export that matched nothing, a misspelt TRACEGRADE_* variable, a bad OTLP endpoint, an empty --format list,
a --store that is not a DuckDB file, malformed run references, and a serve or lake open that fails on its
options without leaving a store, journal or data directory behind.
"""

from __future__ import annotations

import http.server
import json
import os
import socket
import stat
import threading
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.support.grading_cli import run_cli, write_config
from tests.support.grading_traces import AgentRun, fill_store, keywords_config
from tests.support.reporters_samples import sample_report
from tracegrade.cli.main import cli
from tracegrade.errors import InvalidValueError, OutputFileError
from tracegrade.models.dataset import EvalSet
from tracegrade.output_files import write_text_file
from tracegrade.timespec import parse_duration, parse_since, utc_now

# a lake whose catalog refuses at once: options are checked before it is reached, or it fails fast
UNREACHABLE_LAKE = "ducklake:postgres:host=127.0.0.1 port=1 dbname=x connect_timeout=1"
TURN = {"user_content": {"parts": [{"text": "hi"}]}}
EVAL_SET = {"eval_set_id": "s", "eval_cases": [{"eval_id": "a", "conversation": [TURN]}]}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with two traces, a config, an eval set and a saved report (shared: tests only read them)."""
    root = tmp_path_factory.mktemp("ws")
    fill_store(root / "store.duckdb", [AgentRun(1, "hello", "hi there"), AgentRun(2, "bye", "hi, bye")]).close()
    write_config(root / "config.json", keywords_config("hi"))
    (root / "cases.json").write_text(json.dumps(EVAL_SET), encoding="utf-8")
    sample_report().to_file(root / "report.json")
    return root


def _refused(result: object, *fragments: str) -> None:
    """Exit 2 with every fragment in the message (stdout and stderr together)."""
    output = result.output  # type: ignore[attr-defined]
    assert result.exit_code == 2, output  # type: ignore[attr-defined]
    for fragment in fragments:
        assert fragment in output, output


# --- durations and times ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ["traces", "--since", "99999999d"],
        ["traces", "--since", "9999-12-31T23:59:59-05:00"],
        ["grade", "--config", "{ws}/config.json", "--since", "99999999d", "--no-record", "--out", "{ws}/out"],
        ["export-cases", "--since", "99999999d", "-o", "{ws}/never.json"],
    ],
)
def test_huge_since_values_are_out_of_range(workspace: Path, args: list[str]) -> None:
    command = [a.format(ws=workspace) for a in args]
    _refused(run_cli(*command, "--store", workspace / "store.duckdb"), "out of range (at most")
    assert not (workspace / "never.json").exists()


@pytest.mark.parametrize(
    ("option", "value", "says"),
    [
        ("--every", "99999999d", "out of range (at most 36500d"),
        ("--keep", "2099-01-01", "'2099-01-01' is not a duration"),  # was read as -26,000 days: expire everything
        ("--keep", "-5m", "is not a duration"),
        ("--keep", "15", "is not a duration"),
        ("--every", "0s", "must be longer than zero"),
    ],
)
def test_maintain_takes_only_positive_durations(tmp_path: Path, option: str, value: str, says: str) -> None:
    result = run_cli("maintain", "--store", UNREACHABLE_LAKE, "--lake-data", tmp_path / "lake", option, value)
    _refused(result, says, "30s, 15m, 2h" if "duration" in says or "zero" in says else "")
    assert not (tmp_path / "lake").exists()


def test_the_one_duration_parser() -> None:
    assert parse_duration("90s", "--every") == timedelta(seconds=90)
    assert parse_duration("2 hours", "--every") == timedelta(hours=2)
    assert parse_duration("0s", "--keep", allow_zero=True) == timedelta(0)
    for bad in ("2099-01-01", "0s", "-1h", "1y", "soon", ""):
        with pytest.raises(InvalidValueError, match="--every"):
            parse_duration(bad, "--every")
    assert abs((utc_now() - parse_since("36500d")) - timedelta(days=36500)) < timedelta(seconds=5)
    assert parse_since("2026-01-01T05:00:00+05:00").isoformat() == "2026-01-01T00:00:00"
    with pytest.raises(InvalidValueError, match="out of range"):
        parse_since("0001-01-01T00:00:00+05:00")


# --- paths: missing inputs, outputs the system refuses ------------------------------------------------------------


def test_missing_input_and_unwritable_outputs_are_named(workspace: Path, tmp_path: Path) -> None:
    cases = workspace / "cases.json"
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")  # <file>/sub/… is a real OS error, even for root
    _refused(run_cli("convert", tmp_path / "nonexist.json", tmp_path / "out.json"), "nonexist.json", "not found")
    _refused(run_cli("convert", cases, "/proc/nope/out.json"), "cannot write /proc/nope/out.json", "No such file")
    _refused(run_cli("convert", cases, blocker / "sub" / "out.json"), f"cannot write {blocker}/sub/out.json")
    store = workspace / "store.duckdb"
    _refused(run_cli("export-cases", "--store", store, "-o", blocker / "sub" / "x.json"), "Not a directory")
    report = workspace / "report.json"
    gate = run_cli("gate", "--baseline", report, "--candidate", report, "--out", blocker / "sub")
    _refused(gate, f"cannot write {blocker}/sub/summary.md", "Not a directory")
    _refused(run_cli("report", report, "-f", "html", "-o", blocker / "r.html"), "cannot write", "Not a directory")
    _refused(run_cli("schema", "-o", blocker / "s.json"), "cannot write", "Not a directory")
    assert blocker.read_text(encoding="utf-8") == "x"


# --- what an output replaces -----------------------------------------------------------------------------------


def test_a_fifo_or_directory_is_never_replaced(workspace: Path, tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    _refused(run_cli("convert", workspace / "cases.json", fifo), "it is a FIFO", "not a regular file")
    _refused(run_cli("report", workspace / "report.json", "-f", "junit", "-o", fifo), "it is a FIFO")
    _refused(run_cli("sql", "--store", workspace / "store.duckdb", "SELECT 1", "-o", fifo), "it is a FIFO")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(OutputFileError, match="it is a directory"):
        write_text_file(tmp_path, "x")
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]  # no temporary file left either


def test_a_symlinked_output_is_written_through(workspace: Path, tmp_path: Path) -> None:
    target = tmp_path / "real" / "target.json"
    target.parent.mkdir()
    target.write_text("{}", encoding="utf-8")
    target.chmod(0o640)
    link = tmp_path / "link.json"
    link.symlink_to(target)
    result = run_cli("convert", workspace / "cases.json", link)
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert "eval_cases" in json.loads(target.read_text(encoding="utf-8"))  # ADK's eval set, through the link
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    html = tmp_path / "report.html"
    (tmp_path / "dangling.html").symlink_to(html)
    assert run_cli("report", workspace / "report.json", "-f", "html", "-o", tmp_path / "dangling.html").exit_code == 0
    assert (tmp_path / "dangling.html").is_symlink() and "<html" in html.read_text(encoding="utf-8").lower()


def test_an_output_that_is_an_input_is_refused(workspace: Path, tmp_path: Path) -> None:
    source = tmp_path / "a.json"
    source.write_text(json.dumps(EVAL_SET), encoding="utf-8")
    before = source.read_bytes()
    _refused(run_cli("convert", source, source), "it is the input file")
    (tmp_path / "alias.json").symlink_to(source)
    _refused(run_cli("convert", source, tmp_path / "alias.json"), "it is the input file")
    assert source.read_bytes() == before
    report = tmp_path / "report.json"
    sample_report().to_file(report)
    _refused(run_cli("report", report, "-f", "json", "-o", report), "it is the input file")
    store = workspace / "store.duckdb"
    stored = store.read_bytes()
    _refused(run_cli("export-cases", "--store", store, "-o", store), "it is the input file")
    assert store.read_bytes() == stored


def test_export_cases_matching_nothing_writes_nothing(workspace: Path, tmp_path: Path) -> None:
    golden = tmp_path / "golden.json"
    golden.write_text(json.dumps(EVAL_SET), encoding="utf-8")
    result = run_cli(
        "export-cases", "--store", workspace / "store.duckdb", "--where", "service_name = 'typo'", "-o", golden
    )
    _refused(result, "no trace matched --where \"service_name = 'typo'\"", "nothing written")
    assert len(EvalSet.from_file(golden)) == 1
    written = run_cli("export-cases", "--store", workspace / "store.duckdb", "-o", golden)
    assert written.exit_code == 0 and len(EvalSet.from_file(golden)) == 2


@pytest.mark.parametrize("escape", ["true) OR (true", "(status = 'OK'", "true) OR (true -- )"])
def test_a_where_that_would_escape_its_parentheses_is_refused_by_every_command(
    workspace: Path, tmp_path: Path, escape: str
) -> None:
    store = workspace / "store.duckdb"
    stored = store.read_bytes()
    config = workspace / "config.json"
    problem = "leaves 1 parenthesis open" if escape.startswith("(") else "closes a parenthesis it did not open"
    commands = [
        ["traces", "--store", store, "--since", "1m"],
        ["grade", "--store", store, "--config", config, "--since", "1m", "--no-record"],
        ["export-cases", "--store", store, "--since", "1m", "-o", tmp_path / "cases.json"],
        ["forget", "--store", store, "--dry-run"],
    ]
    for command in commands:
        _refused(run_cli(*command, "--where", escape), f"--where {escape!r} {problem}")
    assert store.read_bytes() == stored
    # a parenthesis inside a string or a comment is text: such a predicate runs
    assert run_cli("traces", "--store", store, "--where", "root_name <> ')' -- (").exit_code == 0


# --- environment, endpoints, formats -----------------------------------------------------------------------------


def test_every_command_refuses_a_misspelt_variable(workspace: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    typo = runner.invoke(cli, ["import", str(tmp_path / "f.json")], env={"TRACEGRADE_STOER": str(tmp_path / "s")})
    _refused(typo, "unknown environment variable TRACEGRADE_STOER; did you mean TRACEGRADE_STORE?")
    assert list(tmp_path.iterdir()) == []  # no ./tracegrade.duckdb made instead
    serve = runner.invoke(cli, ["serve", "--store", str(tmp_path / "s.duckdb")], env={"TRACEGRADE_GRPC_PROT": "1"})
    _refused(serve, "did you mean TRACEGRADE_GRPC_PORT")
    legitimate = {"TRACEGRADE_TOKENS_FILE": "t.yaml", "TRACEGRADE_TEST_PG_DSN": "x", "TRACEGRADE_COMPILE": "0"}
    assert runner.invoke(cli, ["schema", "config"], env=legitimate).exit_code == 0


@pytest.fixture
def refusing_collector() -> Iterator[str]:
    """An OTLP/HTTP endpoint that answers every export 400 (not retried: the exporter gives up at once)."""

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(400)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_emit_otlp_checks_the_url_and_reports_a_failed_send(workspace: Path, refusing_collector: str) -> None:
    grade = ["grade", "--store", workspace / "store.duckdb", "--config", workspace / "config.json", "--no-record"]
    grade += ["--format", "console"]
    _refused(run_cli(*grade, "--emit-otlp", "notaurl"), "'notaurl' is not an http:// or https:// URL with a host")
    _refused(run_cli(*grade, "--emit-otlp", "ftp://collector:4318"), "not an http:// or https:// URL")
    sent = run_cli(*grade, "--emit-otlp", refusing_collector)
    assert f"evaluation events to {refusing_collector} failed" in sent.stderr
    assert "sent " not in sent.stderr


def test_grade_refuses_an_empty_format_list(workspace: Path, tmp_path: Path) -> None:
    result = run_cli(
        "grade", "--store", workspace / "store.duckdb", "--config", workspace / "config.json", "--format", ""
    )
    _refused(result, "give at least one format")


# --- stores, run references, serve ---------------------------------------------------------------------------


def test_a_store_that_is_not_a_duckdb_file(workspace: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim.json"
    victim.write_text('{"eval_set_id": "precious", "eval_cases": []}', encoding="utf-8")
    before = victim.read_bytes()
    for args in (["import", workspace / "cases.json"], ["sql", "SELECT 1"]):
        _refused(run_cli(args[0], "--store", victim, *args[1:]), f"{victim} is not a DuckDB file")
    assert victim.read_bytes() == before


@pytest.mark.parametrize(
    ("ref", "says"),
    [("", "an empty run reference: give a run id"), ("latest~x", "latest~N takes a whole number N")],
)
def test_run_references_say_what_they_look_like(workspace: Path, ref: str, says: str) -> None:
    _refused(run_cli("diff", "--store", workspace / "store.duckdb", ref, "latest"), says, "latest~N")


def test_serve_refuses_an_unresolvable_host_before_creating_the_store(tmp_path: Path, monkeypatch) -> None:
    real = socket.getaddrinfo

    def resolve(host: object, *args: object, **kwargs: object) -> object:
        if host == "no.such.host.invalid":  # as a resolver answers; no name service needed to run the test
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return real(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    result = run_cli("serve", "--store", tmp_path / "s.duckdb", "--host", "no.such.host.invalid")
    _refused(result, "--host 'no.such.host.invalid' does not resolve")
    assert list(tmp_path.iterdir()) == []


def test_failed_options_leave_no_store_journal_or_lake_directory(workspace: Path, tmp_path: Path) -> None:
    rules = tmp_path / "bad.yaml"
    rules.write_text("rules:\n  - name: r\n    criteria: {trajectory: {match_type: EXACT\n", encoding="utf-8")
    store = tmp_path / "new" / "s.duckdb"
    serve = run_cli("serve", "--store", store, "--worker-rules", rules, "--grpc-port", "0", "--http-port", "0")
    _refused(serve, str(rules))
    assert not (tmp_path / "new").exists()
    lake_data = tmp_path / "lake" / "data"
    graded = run_cli(
        "grade", "--store", UNREACHABLE_LAKE, "--lake-data", lake_data, "--config", workspace / "config.json"
    )
    _refused(graded, "cannot open lake")
    assert not (tmp_path / "lake").exists()
