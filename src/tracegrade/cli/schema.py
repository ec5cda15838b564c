"""``tracegrade schema [evalset|config|report] [-o FILE]``: print the JSON Schema of a tracegrade file format.

Editors (VS Code's ``json.schemas``, JetBrains) use it to complete and check eval-set and config files
as they are typed. The schema describes what the loaders accept (pydantic's validation schema).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel

from tracegrade.cli.common import friendly_errors
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet
from tracegrade.models.results import EvalReport
from tracegrade.output_files import write_text_file

__all__ = ["command", "file_schema"]

_MODELS: dict[str, type[BaseModel]] = {"evalset": EvalSet, "config": EvalConfig, "report": EvalReport}
_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def file_schema(kind: str) -> dict[str, Any]:
    """The JSON Schema of one file format: ``"evalset"``, ``"config"`` or ``"report"``."""
    schema = _MODELS[kind].model_json_schema()
    return {"$schema": _DIALECT, **schema}


@click.command("schema")
@click.argument("kind", type=click.Choice(sorted(_MODELS)), default="evalset", required=False)
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), help="Write to FILE instead.")
@friendly_errors
def command(kind: str, output: Path | None) -> None:
    """Print the JSON Schema of an eval-set, config or report file (default: evalset)."""
    text = json.dumps(file_schema(kind), indent=2, ensure_ascii=False) + "\n"
    if output is None:
        click.echo(text, nl=False)
        return
    write_text_file(output, text)
    click.echo(f"wrote the {kind} schema to {output}", err=True)
