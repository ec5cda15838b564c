"""``tracegrade init DIR``: scaffold a project whose ``pytest`` passes at once, offline, with no API key.

It writes an example agent (a plain callable, or a LangGraph graph with a scripted model), an eval set
with one case designed to fail (marked as an expected failure, so the run passes and still shows why it
fails), a config of deterministic criteria that compare tool arguments (an LLM judge commented out), a
pytest file using the tracegrade plugin, a ``pytest.ini`` and a README.
"""

from __future__ import annotations

import contextlib
import re
from importlib import resources
from pathlib import Path

import click

from tracegrade.cli.common import UsageProblem, friendly_errors
from tracegrade.errors import OutputFileError
from tracegrade.output_files import write_text_file

__all__ = ["AGENT_KINDS", "command", "scaffold"]

#: --agent choice -> (template of agent.py, README wording, extra packages to install)
AGENT_KINDS: dict[str, tuple[str, str, str]] = {
    "callable": ("agent_callable.py.txt", "a plain function traced with trace_node/trace_tool", ""),
    "langgraph": ("agent_langgraph.py.txt", "a LangGraph graph with a scripted chat model", " 'tracegrade[langgraph]'"),
}

# written file -> template (agent.py is chosen by --agent)
_COMMON_FILES = {
    "eval_set.json": "eval_set.json.txt",
    "eval_config.yaml": "eval_config.yaml.txt",
    "test_agent.py": "test_agent.py.txt",
    "pytest.ini": "pytest.ini.txt",
    "README.md": "README.md.txt",
}
_README_SLOT = re.compile(r"\{(name|agent_kind|extra)\}")  # what the README template fills in


def _template(name: str) -> str:
    return resources.files("tracegrade.cli").joinpath("init_templates", name).read_text(encoding="utf-8")


def scaffold(directory: Path, agent_kind: str = "callable") -> list[Path]:
    """Write the project into ``directory`` (created if needed; it must be empty); returns the files written."""
    if agent_kind not in AGENT_KINDS:
        raise UsageProblem(f"unknown agent kind {agent_kind!r}; choose one of {', '.join(AGENT_KINDS)}")
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise UsageProblem(f"{directory} is not an empty directory; give a new or empty directory to scaffold into")
    agent_template, agent_words, extra = AGENT_KINDS[agent_kind]
    files = {"agent.py": _template(agent_template)}
    for target, template in _COMMON_FILES.items():
        files[target] = _template(template)
    # one pass, so that a directory named like a slot ("{extra}") is written as it is named
    values = {"name": directory.resolve().name, "agent_kind": agent_words, "extra": extra}
    files["README.md"] = _README_SLOT.sub(lambda slot: values[slot.group(1)], files["README.md"])
    created = _missing_directories(directory)
    written: list[Path] = []
    try:
        for name, text in files.items():
            write_text_file(directory / name, text)  # each file whole or not at all; parents created
            written.append(directory / name)
    except OutputFileError as exc:
        # take back what was written: half a project would make the directory "not empty", refusing the retry
        for path in written:
            path.unlink(missing_ok=True)
        for made in reversed(created):
            with contextlib.suppress(OSError):
                made.rmdir()
        raise OutputFileError(
            exc.path, f"{exc.reason}; nothing of the project was left behind, so the same command can run again"
        ) from None
    return written


def _missing_directories(directory: Path) -> list[Path]:
    """The directories that writing into ``directory`` creates (none when it exists), outermost first."""
    missing = []
    for path in [directory.absolute(), *directory.absolute().parents]:
        if path.exists() or path.is_symlink():
            break
        missing.append(path)
    return missing[::-1]


@click.command("init")
@click.argument("directory", type=click.Path(path_type=Path, file_okay=False))
@click.option(
    "--agent",
    "agent_kind",
    type=click.Choice(list(AGENT_KINDS)),
    default="callable",
    show_default=True,
    help="The example agent: a plain callable, or a LangGraph graph (needs tracegrade[langgraph]).",
)
@friendly_errors
def command(directory: Path, agent_kind: str) -> None:
    """Scaffold an evaluation project in DIRECTORY (new or empty): run `pytest` in it."""
    for path in scaffold(directory, agent_kind):
        click.echo(f"wrote {path}")
    click.echo(f"\nnext: cd {directory} && pytest")
