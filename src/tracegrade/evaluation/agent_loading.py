"""Loading the agent under test from a module (dotted path, ``.py`` file or package directory) for
``evaluate_file`` and the CLI.

A Google ADK project keeps its agent as ``root_agent`` in ``my_agent/agent.py``, inside the package
``my_agent`` (``adk run my_agent`` and ``adk eval my_agent`` take the directory); that layout loads here too: the
directory, or the dotted name ``my_agent.agent``, finds ``root_agent``.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

from tracegrade.errors import MissingFileError

__all__ = ["AGENT_ATTRIBUTES", "importable_from", "load_agent"]

#: the module attributes searched, in order, for the agent to evaluate (``root_agent``: Google ADK's name)
AGENT_ATTRIBUTES = ("graph", "compiled_graph", "agent_graph", "app", "agent", "root_agent")

#: the module of an agent package directory that holds its agent when the package itself does not (ADK's layout)
PACKAGE_AGENT_MODULE = "agent"


def importable_from(directory: str) -> None:
    """Put ``directory`` first on ``sys.path`` (once), as Python does for the script or ``-m`` module it runs.

    A console script such as ``tracegrade`` has its own directory there instead, so without this an agent file
    could not import the modules beside it (``from tools import search``), nor a module name given on the
    command line (an agent, a worker rules file's ``plugins``) be found in the current directory. It stays there:
    the agent may import lazily, mid-run."""
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise MissingFileError(f"Agent module file not found: {path}")
    importable_from(str(path.resolve().parent))
    name = f"tracegrade_agent_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path} as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except ImportError as exc:
        # a module of a package (ADK's my_agent/agent.py: `from . import tools`) cannot run as a file on its own
        if "no known parent package" in str(exc) and (path.parent / "__init__.py").is_file():
            package = path.resolve().parent
            raise ImportError(
                f"{path} uses relative imports: it is a module of the package {package.name}; pass the package "
                f"directory ({path.parent}) instead, or from {package.parent} its module name "
                f"{package.name}.{path.stem}"
            ) from None
        raise
    return module


def _import_package_dir(path: Path) -> list[ModuleType]:
    """The package a directory is (imported by its name from the directory above it, as ADK imports an agent
    folder) and, when there is one, its ``agent`` module: the modules to look for the agent in, in order."""
    directory = path.resolve()
    has_agent_module = (directory / f"{PACKAGE_AGENT_MODULE}.py").is_file()
    if not (directory / "__init__.py").is_file() and not has_agent_module:
        raise ImportError(
            f"{path} is a directory with neither __init__.py nor {PACKAGE_AGENT_MODULE}.py: pass the agent's .py "
            "file, or the directory of an agent package"
        )
    name = directory.name
    if not name.isidentifier():
        raise ImportError(
            f"the directory {path} cannot be imported as a package: {name!r} is not a Python name; rename it "
            "(letters, digits and underscores) or pass the agent's .py file"
        )
    importable_from(str(directory.parent))
    package = importlib.import_module(name)
    locations = [Path(p).resolve() for p in getattr(package, "__path__", [])]
    if directory not in locations:  # an installed or already imported module of the same name took its place
        where = getattr(package, "__file__", None) or ", ".join(map(str, locations)) or "a built-in module"
        raise ImportError(
            f"the directory {path} cannot be imported as the package {name}: a different module of that name "
            f"({where}) is imported instead; rename the directory or pass the agent's .py file"
        )
    modules = [package]
    if has_agent_module:
        modules.append(importlib.import_module(f"{name}.{PACKAGE_AGENT_MODULE}"))
    return modules


def _import(agent_module: str | Path) -> list[ModuleType]:
    """The modules to look for the agent in, in order."""
    path = Path(agent_module)
    if path.is_dir():
        return _import_package_dir(path)
    if path.suffix == ".py" or path.exists():
        return [_import_file(path)]
    importable_from(os.getcwd())
    return [importlib.import_module(str(agent_module))]


def load_agent(agent_module: str | Path) -> Any:
    """The first of ``graph``, ``compiled_graph``, ``agent_graph``, ``app``, ``agent``, ``root_agent`` the module
    defines; for a package directory, the package's or else its ``agent`` module's."""
    modules = _import(agent_module)
    for module in modules:
        for attribute in AGENT_ATTRIBUTES:
            agent = getattr(module, attribute, None)
            # a package's submodule is an attribute of it (ADK's my_agent/__init__.py: `from . import agent`)
            if agent is not None and not isinstance(agent, ModuleType):
                return agent
    found_in = (
        f"neither {' nor '.join(m.__name__ for m in modules)} defines any of"
        if len(modules) > 1
        else f"module {agent_module} defines none of"
    )
    raise AttributeError(
        f"{found_in} {', '.join(AGENT_ATTRIBUTES)}; "
        "assign the agent (a graph, a pydantic-ai Agent, an ADK agent or a callable) to one of them"
    )
