"""Loading the agent under test from a module (dotted path or ``.py`` file) for ``evaluate_file`` and the CLI."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tracegrade.errors import MissingFileError

__all__ = ["AGENT_ATTRIBUTES", "load_agent"]

#: the module attributes searched, in order, for the agent to evaluate
AGENT_ATTRIBUTES = ("graph", "compiled_graph", "agent_graph", "app", "agent")


def _importable_from(directory: str) -> None:
    """Put ``directory`` first on ``sys.path`` (once), as Python does for the script or ``-m`` module it runs.

    A console script such as ``tracegrade`` has its own directory there instead, so without this an agent file
    could not import the modules beside it (``from tools import search``), nor a module name given on the
    command line be found in the current directory. It stays there: the agent may import lazily, mid-run."""
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _import(agent_module: str | Path) -> ModuleType:
    path = Path(agent_module)
    if path.suffix == ".py" or path.exists():
        if not path.is_file():
            raise MissingFileError(f"Agent module file not found: {path}")
        _importable_from(str(path.resolve().parent))
        name = f"tracegrade_agent_{path.stem}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot import {path} as a Python module")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    _importable_from(os.getcwd())
    return importlib.import_module(str(agent_module))


def load_agent(agent_module: str | Path) -> Any:
    """The first of ``graph``, ``compiled_graph``, ``agent_graph``, ``app``, ``agent`` the module defines."""
    module = _import(agent_module)
    for attribute in AGENT_ATTRIBUTES:
        agent = getattr(module, attribute, None)
        if agent is not None:
            return agent
    raise AttributeError(
        f"module {agent_module} defines none of {', '.join(AGENT_ATTRIBUTES)}; "
        "assign the agent (a graph, a pydantic-ai Agent or a callable) to one of them"
    )
