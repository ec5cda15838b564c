"""A YAML eval set or config that does not parse is reported on one line naming the file and the places in it,
not with PyYAML's ``"<unicode string>"``."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from tracegrade.cli.main import cli
from tracegrade.errors import ConfigError
from tracegrade.models.config import EvalConfig


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (
            "criteria:\n  trajectory: {threshold: 1.0\n  x: 1\n",
            "did not find expected ',' or '}' in {path}, line 3, column 4 "
            "(while parsing a flow mapping at line 2, column 15)",
        ),
        ("criteria: a: b\n", "mapping values are not allowed in this context in {path}, line 1, column 12"),
        (
            "criteria: \x07\n",
            "unacceptable character #x0007: control characters are not allowed in {path} at character 11",
        ),
    ],
    ids=["flow-mapping", "mapping-value", "control-character"],
)
def test_validate_names_the_yaml_file_and_the_place(tmp_path: Path, text: str, said: str) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(cli, ["validate", str(path)], catch_exceptions=False)
    assert result.exit_code != 0
    assert f"at $: invalid YAML: {said.replace('{path}', str(path))}\n" in result.output
    assert "<unicode string>" not in result.output


def test_loading_a_yaml_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yml"
    path.write_text("criteria: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        EvalConfig.from_file(path)
    ((where, what),) = info.value.problems
    assert where == "$" and f"in {path}, line 2, column 1" in what and "\n" not in what
