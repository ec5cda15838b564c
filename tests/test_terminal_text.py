"""What the store commands print on a terminal holds stored text as it is, never as instructions: an escape
sequence an exporter put in a span (clear the screen, retitle the window, a forged hyperlink) is shown as visible
characters by `traces`, `show` and `sql`, and ``[/]`` in an eval set's or case's name is not rich markup (it made
`runs` and `diff` raise instead of printing)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from tests.support.grading_cli import run_cli, write_config
from tests.support.grading_traces import AgentRun, fill_store
from tracegrade.cli.main import cli
from tracegrade.models import EvalCase, EvalSet, Invocation, ToolCall
from tracegrade.models.config import CriteriaConfig, CriterionConfig, EvalConfig

_ESC = "\x1b"
_QUERY = f"weather? {_ESC}[2J{_ESC}]8;;http://evil.example{_ESC}\\click{_ESC}]8;;{_ESC}\\ \u202eolleh"
_TRACE = "ab" * 16


def run(*args: str | Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _hostile_trace(path: Path) -> None:
    messages = [{"role": "user", "parts": [{"type": "text", "content": _QUERY}]}]
    span = {
        "traceId": _TRACE,
        "spanId": "01" * 8,
        "name": f"invoke_agent {_ESC}[31mred",
        "kind": 1,
        "startTimeUnixNano": "1764000000000000000",
        "endTimeUnixNano": "1764000001000000000",
        "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}},
            {"key": "gen_ai.input.messages", "value": {"stringValue": json.dumps(messages)}},
        ],
    }
    document = {"resourceSpans": [{"scopeSpans": [{"scope": {"name": "agent"}, "spans": [span]}]}]}
    path.write_text(json.dumps(document))


def test_escape_sequences_in_spans_are_shown_not_sent_to_the_terminal(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    _hostile_trace(tmp_path / "hostile.json")
    code, out, err = run("import", "--store", store, tmp_path / "hostile.json")
    assert code == 0, out + err
    outputs = {
        "traces": run("traces", "--store", store, "--where", "status <> 'x'")[1],
        "show": run("show", "--store", store, _TRACE[:8])[1],
        "sql": run("sql", "--store", store, "SELECT user_query, root_name FROM traces")[1],
    }
    for command, printed in outputs.items():
        assert _ESC not in printed and "\u202e" not in printed, command
        assert "weather? \u241b[" in printed, (command, printed)  # the traces table has room for no more
    assert "weather? \u241b[2J\u241b]8;;http://evil.example\u241b\\click" in outputs["show"]
    assert "weather? \u241b[2J\u241b]8;;" in outputs["sql"]
    assert "invoke_agent \u241b[31mred" in outputs["show"]
    # data formats keep the text as stored (JSON escapes it)
    assert json.loads(run("sql", "--store", store, "--format", "json", "SELECT user_query FROM traces")[1]) == [
        {"user_query": _QUERY}
    ]


def test_runs_and_diff_print_names_that_look_like_markup(tmp_path: Path) -> None:
    store = tmp_path / "store.duckdb"
    case = "cancel[/]"
    runs = [AgentRun(1, "cancel order 5", "order 5 cancelled", [("cancel", {"order": 5})], case_id=case)]
    fill_store(store, runs).close()  # the commands below open the file themselves
    config = EvalConfig(criteria=CriteriaConfig(contains_keywords=CriterionConfig.contains_keywords(["order"])))
    write_config(tmp_path / "config.json", config)
    conversation = [Invocation.simple("x", None, [ToolCall(name="cancel", args={"order": 5})])]
    EvalSet(eval_set_id="orders[/]", eval_cases=[EvalCase(eval_id=case, conversation=conversation)]).to_file(
        tmp_path / "evalset.json"
    )
    for _ in range(2):
        graded = run_cli(
            "grade",
            *("--store", store, "--evalset", tmp_path / "evalset.json", "--config", tmp_path / "config.json"),
            *("--out", tmp_path / "out", "--format", "json"),
        )
        assert graded.exit_code == 0, graded.output
    code, out, err = run("runs", "--store", store)
    assert code == 0, err
    assert "orders[/]" in out
    code, out, err = run("diff", "--store", store, "latest~1", "latest", "--all")
    assert code == 0, err
    assert "cancel[/]" in out and "1 unchanged" in out
