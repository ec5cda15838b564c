"""`tracegrade import` of files as operators have them: gzip'd (one or several members, cut short), zstd'd, and
OTLP/JSON requests one after another as ``cat a.json b.json`` writes them; each on a real DuckDB file."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TraceStore

from .support.store_records import FIXTURES


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def span_ids(path: Path) -> set[str]:
    document = json.loads(path.read_text())
    return {span["spanId"] for rs in document["resourceSpans"] for ss in rs["scopeSpans"] for span in ss["spans"]}


def stored_span_ids(store_path: Path) -> set[str]:
    with TraceStore(store_path, read_only=True) as store:
        return {row[0] for row in store.query("SELECT span_id FROM spans").rows}


def test_requests_one_after_another_as_cat_writes_them_are_each_imported(tmp_path: Path) -> None:
    first, second = FIXTURES[0], FIXTURES[1]
    joined = tmp_path / "joined.json"  # pretty-printed documents, neither one per line nor one in all
    joined.write_text(first.read_text() + second.read_text())
    code, out, err = run("import", "--store", tmp_path / "s.duckdb", joined)
    assert code == 0, out + err
    assert stored_span_ids(tmp_path / "s.duckdb") == span_ids(first) | span_ids(second)
    assert "2 traces mapped" in out


def test_a_bad_document_after_good_ones_is_placed_by_the_line_it_starts_on(tmp_path: Path) -> None:
    text = FIXTURES[0].read_text()
    joined = tmp_path / "joined.json"
    joined.write_text(text + text[:200])
    code, _, err = run("import", "--store", tmp_path / "s.duckdb", joined)
    assert code == 2
    start = text.count("\n") + 1
    assert f"at line {start}: invalid JSON at line " in err
    assert not (tmp_path / "s.duckdb").exists()  # nothing written: decoding comes first


def test_gzipd_files_are_imported_whatever_their_layout(tmp_path: Path) -> None:
    first, second = FIXTURES[0], FIXTURES[1]
    lines = "\n".join(json.dumps(json.loads(p.read_text())) for p in (first, second)) + "\n"
    (tmp_path / "both.jsonl.gz").write_bytes(gzip.compress(lines.encode()))
    members = gzip.compress(first.read_bytes()) + gzip.compress(second.read_bytes())  # `cat a.gz b.gz`
    (tmp_path / "members.gz").write_bytes(members)
    for name in ("both.jsonl.gz", "members.gz"):
        store_path = tmp_path / f"{name}.duckdb"
        code, out, err = run("import", "--store", store_path, tmp_path / name)
        assert code == 0, out + err
        assert stored_span_ids(store_path) == span_ids(first) | span_ids(second)


def test_a_cut_gzip_file_and_a_zstd_file_are_refused_saying_what_to_do(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(gzip.compress(FIXTURES[0].read_bytes())[:100])
    code, _, err = run("import", "--store", tmp_path / "s.duckdb", cut)
    assert code == 2
    assert f"{cut} is invalid" in err and "the gzip stream is damaged or cut short" in err
    assert f"gzip -t {cut}" in err
    zstd = tmp_path / "spans.json.zst"
    zstd.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
    code, _, err = run("import", "--store", tmp_path / "s.duckdb", zstd)
    assert code == 2 and "zstd-compressed" in err and f"zstd -d {zstd}" in err


def test_a_directory_imports_every_file_under_it_but_hidden_ones(tmp_path: Path) -> None:
    folder = tmp_path / "dumps"
    (folder / "day2").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/main\n")  # not OTLP: left out as hidden
    (folder / "day1.json").write_bytes(FIXTURES[0].read_bytes())
    (folder / "day2" / "late.json.gz").write_bytes(gzip.compress(FIXTURES[1].read_bytes()))
    code, out, err = run("import", "--store", tmp_path / "s.duckdb", folder)
    assert code == 0, out + err
    assert out.index("day1.json:") < out.index("late.json.gz:")  # in name order
    assert stored_span_ids(tmp_path / "s.duckdb") == span_ids(FIXTURES[0]) | span_ids(FIXTURES[1])
    (tmp_path / "empty").mkdir()
    code, _, err = run("import", "--store", tmp_path / "s.duckdb", tmp_path / "empty")
    assert code == 2 and "holds no file to import" in err


def test_standard_input_is_imported_once_through_a_server_too(tmp_path: Path) -> None:
    from .support.server_process import ServerProcess

    store_path = tmp_path / "s.duckdb"
    piped = gzip.compress(FIXTURES[0].read_bytes())
    result = CliRunner().invoke(cli, ["import", "--store", str(store_path), "-"], input=piped)
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("<stdin>: ")
    assert stored_span_ids(store_path) == span_ids(FIXTURES[0])
    code, _, err = run("import", "--store", store_path, "-", "-")
    assert code == 2 and "given more than once" in err
    token = "s3cret-token-long-enough"
    with ServerProcess(store_path, extra_args=("--token", token)) as server:
        command = ["import", "--store", str(store_path), "--token", token, "-"]
        result = CliRunner().invoke(cli, command, input=FIXTURES[1].read_bytes())
        assert result.exit_code == 0, result.output
        assert f"sending to {server.http_url}" in result.stdout and "<stdin>: " in result.stdout
        code, out, err = run("sql", "--store", store_path, "--token", token, "--format", "json", "FROM spans")
        assert code == 0, err
        assert span_ids(FIXTURES[1]) <= {row["span_id"] for row in json.loads(out)}  # the server answers once stored


def test_through_a_server_with_a_lower_request_limit_the_import_is_sent_in_smaller_requests(tmp_path: Path) -> None:
    from .support.server_process import ServerProcess

    store_path = tmp_path / "s.duckdb"
    code, _, err = run("import", "--store", store_path, FIXTURES[0])  # a store for the server to hold
    assert code == 0, err
    spans = [
        {
            "traceId": f"{index // 100 + 1:032x}",
            "spanId": f"{index + 1:016x}",
            "name": "work",
            "startTimeUnixNano": "1764000000000000000",
            "endTimeUnixNano": "1764000001000000000",
            "attributes": [{"key": "payload", "value": {"stringValue": "y" * 2000}}],
        }
        for index in range(1500)  # one chunk of import's (up to 2,000 spans, 4 MiB): about 3 MiB
    ]
    dump = tmp_path / "big.json"
    dump.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"scope": {"name": "s"}, "spans": spans}]}]}))
    token = "s3cret-token-long-enough"
    with ServerProcess(store_path, extra_args=("--token", token, "--max-request-bytes", "1MB")):
        code, out, err = run("import", "--store", store_path, "--token", token, dump)
        assert code == 0, out + err
        assert "big.json: 1500 spans accepted, 0 log records accepted, 0 rejected" in out
        counted = "SELECT count(*) AS n FROM spans WHERE name = 'work'"
        code, out, err = run("sql", "--store", store_path, "--token", token, "--format", "json", counted)
        assert code == 0 and json.loads(out) == [{"n": 1500}], err
