"""``tracegrade convert SRC DEST``: write an eval set or config in the other format (tracegrade <-> Google ADK).

An ADK file (``*.evalset.json``, an older ``*.test.json`` list, ``test_config.json``) is written as tracegrade's;
a tracegrade file is written as ADK's (``--to`` forces the direction). Config slots ADK has no metric for are an
error unless ``--lossy`` drops them. Exit 2 with every problem listed when SRC cannot be read or converted, or
when DEST cannot be written (DEST is never SRC itself: convert does not rewrite a file in place).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tracegrade.cli.common import friendly_errors
from tracegrade.errors import FileFormatError
from tracegrade.models import adk_files
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet
from tracegrade.models.files import read_json_file
from tracegrade.output_files import write_text_file

__all__ = ["command", "convert_file"]


def convert_file(src: Path, dest: Path, to: str = "auto", *, lossy: bool = False) -> str:
    """Convert ``src`` into ``dest``; returns a one-line summary. Problems raise :class:`FileFormatError`, a
    missing ``src`` :class:`MissingFileError`, a ``dest`` that cannot be written :class:`OutputFileError`."""
    data = read_json_file(src, "input")
    adk = adk_files.adk_document(data, str(src)) if to in ("auto", "tracegrade") else None
    if adk is not None:
        _, loaded = adk
        out: Any = loaded.model_dump(mode="json")
        target = "tracegrade"
    else:
        if to == "tracegrade":
            raise FileFormatError(str(src), [("$", "not an ADK eval set or config; nothing to convert to tracegrade")])
        loaded = EvalConfig.from_file(src) if isinstance(data, dict) and "criteria" in data else EvalSet.from_file(src)
        if isinstance(loaded, EvalSet):
            out = adk_files.eval_set_to_adk(loaded)
        else:
            out = adk_files.config_to_adk(loaded, lossy=lossy)
        target = "ADK"
    write_text_file(dest, json.dumps(out, indent=2, ensure_ascii=False) + "\n", inputs=[src])
    what = f"eval set ({len(loaded)} cases)" if isinstance(loaded, EvalSet) else "config"
    return f"wrote {dest}: {target} {what}"


@click.command("convert")
@click.argument("src", type=click.Path(path_type=Path, dir_okay=False))
@click.argument("dest", type=click.Path(path_type=Path, dir_okay=False))
@click.option(
    "--to",
    type=click.Choice(["auto", "adk", "tracegrade"]),
    default="auto",
    show_default=True,
    help="Format to write; 'auto' writes the format SRC is not in.",
)
@click.option("--lossy", is_flag=True, help="Drop config slots ADK has no metric for instead of failing.")
@friendly_errors
def command(src: Path, dest: Path, to: str, lossy: bool) -> None:
    """Write eval set or config SRC as DEST in the other format (tracegrade <-> Google ADK)."""
    click.echo(convert_file(src, dest, to, lossy=lossy))
