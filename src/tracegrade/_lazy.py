"""Lazy package attributes (PEP 562): a package's public names import their modules on first use.

``import tracegrade`` must stay fast and must not load DuckDB, grpc or litellm until a part that needs them
is used, so the packages that re-export names (``tracegrade``, ``tracegrade.store``, ``tracegrade.testing``)
map each name to its module and resolve it here. Type checkers cannot follow this: each such package also
imports its names under ``if TYPE_CHECKING:``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, homes: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose names ``homes`` maps to defining modules.

    Call it from the package's ``__init__`` (``__getattr__, __dir__ = lazy_exports(__name__, HOMES)``): a
    name resolved once is stored in the package, so later lookups never reach ``__getattr__`` again.
    """
    namespace = sys.modules[package].__dict__

    def __getattr__(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(homes))

    return __getattr__, __dir__
