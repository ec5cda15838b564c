"""What the store commands print: `sql --format json` keeps every column when names repeat (a JSON object holds
one value a name), on a file opened directly and through a running server."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.store import TraceStore

_QUERY = "SELECT 1 AS x, 2 AS x, 3 AS x_1, 'é\n' AS x, NULL AS y"


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def test_repeated_column_names_get_duckdbs_suffixes_and_keep_their_values() -> None:
    from tracegrade.cli.store_access import unique_columns

    assert unique_columns(["x", "x", "x_1", "x"]) == ["x", "x_2", "x_1", "x_3"]
    assert unique_columns(["a", "b"]) == ["a", "b"]


def test_sql_json_keeps_every_column_of_a_repeated_name(tmp_path: Path) -> None:
    from .support.server_process import ServerProcess

    path = tmp_path / "store.duckdb"
    TraceStore(path).close()
    expected = [{"x": 1, "x_2": 2, "x_1": 3, "x_3": "é\n", "y": None}]
    code, out, err = run("sql", "--store", path, "--format", "json", _QUERY)
    assert code == 0, err
    assert json.loads(out) == expected
    assert "column names repeat; in the JSON the later ones are 'x_2', 'x_3'" in err
    with ServerProcess(path, extra_args=("--token", "s3cret-token-long-enough")):
        code, out, err = run("sql", "--store", path, "--token", "s3cret-token-long-enough", "--format", "json", _QUERY)
        assert code == 0, err
        assert json.loads(out) == expected
