"""``tracegrade convert SRC DEST``: write an eval set or config in the other format (tracegrade <-> Google ADK).

An ADK file (``*.evalset.json``, an older ``*.test.json`` list, ``test_config.json``) is written as tracegrade's;
a tracegrade file is written as ADK's (``--to`` forces the direction). What ADK's format cannot hold (config
slots ADK has no metric for, run settings and slot options away from their defaults such as ``num_runs`` or
``tool_args``, an eval set's metadata, a tool result without a call id...) is an error naming each loss unless
``--lossy`` drops it, with a warning listing what was dropped. Exit 2 with every problem listed when
SRC cannot be read or converted, or when DEST cannot be written (DEST is never SRC itself: convert does not
rewrite a file in place).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.errors import FileFormatError
from tracegrade.models import adk_files
from tracegrade.models.config import EvalConfig
from tracegrade.models.dataset import EvalSet
from tracegrade.models.files import read_json_file
from tracegrade.output_files import write_text_file

__all__ = ["command", "convert_file"]

Problem = tuple[str, str]


def convert_file(src: Path, dest: Path, to: str = "auto", *, lossy: bool = False) -> tuple[str, list[Problem]]:
    """Convert ``src`` into ``dest``; returns a one-line summary and what ``lossy`` dropped (``(path in src,
    what)``). Problems raise :class:`FileFormatError`, a missing ``src`` :class:`MissingFileError`, a ``dest``
    that cannot be written :class:`OutputFileError`, a loss without ``lossy`` :class:`UsageProblem`."""
    data = read_json_file(src, "input")
    dropped: list[Problem] = []
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
            out = adk_files.eval_set_to_adk(loaded, lossy=True)
            dropped = adk_files.eval_set_losses(loaded, out)
        else:
            out = adk_files.config_to_adk(loaded, lossy=True)
            dropped = adk_files.config_losses(loaded)
        if dropped and not lossy:
            raise UsageProblem(
                f"cannot write {src} in ADK's format without losing {_count(dropped)}:\n{_listed(dropped)}\n"
                "convert with --lossy to write it without them, or keep grading with the tracegrade file"
            )
        target = "ADK"
    write_text_file(dest, json.dumps(out, indent=2, ensure_ascii=False) + "\n", inputs=[src])
    what = f"eval set ({len(loaded)} cases)" if isinstance(loaded, EvalSet) else "config"
    return f"wrote {dest}: {target} {what}", dropped


def _count(problems: list[Problem]) -> str:
    return f"{len(problems)} thing{'s' if len(problems) != 1 else ''} it has no place for"


def _listed(problems: list[Problem]) -> str:
    return "\n".join(f"  at {where}: {what}" for where, what in problems)


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
@click.option(
    "--lossy", is_flag=True, help="Drop what ADK's format cannot hold (listed in a warning) instead of failing."
)
@friendly_errors
def command(src: Path, dest: Path, to: str, lossy: bool) -> None:
    """Write eval set or config SRC as DEST in the other format (tracegrade <-> Google ADK)."""
    summary, dropped = convert_file(src, dest, to, lossy=lossy)
    if dropped:
        click.echo(f"warning: --lossy dropped {_count(dropped)} from {src}:\n{_listed(dropped)}", err=True)
    click.echo(summary)
