"""tracegrade's build backend: setuptools', told by each hook whether ``setup.py`` may compile.

setuptools runs ``setup.py`` for every PEP 517 hook, the metadata and requirement hooks included, and
``setup.py`` cannot tell from its command line which hook called it (an editable install's metadata step runs
``dist_info``, not ``editable_wheel``). Each hook here names the build it serves in ``TRACEGRADE_BUILD`` before
setuptools runs ``setup.py``: ``wheel`` (may compile, see ``TRACEGRADE_COMPILE`` in setup.py), ``editable``
(compiles only when ``TRACEGRADE_COMPILE=1``), ``metadata`` or ``sdist`` (never compile). mypy, which compiles,
is a build requirement only of the builds that compile, so a plain editable install never installs it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from setuptools import build_meta as _setuptools

__all__ = [
    "build_editable",
    "build_sdist",
    "build_wheel",
    "get_requires_for_build_editable",
    "get_requires_for_build_sdist",
    "get_requires_for_build_wheel",
    "prepare_metadata_for_build_editable",
    "prepare_metadata_for_build_wheel",
]

MYPY_REQUIREMENT = "mypy>=1.13,<3"  # mypyc, which compiles the mapper; CI pins its version in constraints.txt


def _compile_setting() -> str:
    return os.environ.get("TRACEGRADE_COMPILE", "").strip().lower()


@contextmanager
def _build(kind: str) -> Iterator[None]:
    previous = os.environ.get("TRACEGRADE_BUILD")
    os.environ["TRACEGRADE_BUILD"] = kind
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TRACEGRADE_BUILD"]
        else:
            os.environ["TRACEGRADE_BUILD"] = previous


def _as(kind: str, hook: Callable[..., Any]) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        with _build(kind):
            return hook(*args, **kwargs)

    run.__name__ = hook.__name__
    run.__doc__ = f"setuptools' ``{hook.__name__}``, run as a {kind} build."
    return run


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' requirements, and mypy unless ``TRACEGRADE_COMPILE=0``."""
    with _build("metadata"):
        requires = list(_setuptools.get_requires_for_build_wheel(config_settings))
    return requires if _compile_setting() == "0" else [*requires, MYPY_REQUIREMENT]


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    """setuptools' requirements, and mypy only when ``TRACEGRADE_COMPILE=1``."""
    with _build("metadata"):
        requires = list(_setuptools.get_requires_for_build_editable(config_settings))
    return [*requires, MYPY_REQUIREMENT] if _compile_setting() == "1" else requires


get_requires_for_build_sdist = _as("metadata", _setuptools.get_requires_for_build_sdist)
prepare_metadata_for_build_wheel = _as("metadata", _setuptools.prepare_metadata_for_build_wheel)
prepare_metadata_for_build_editable = _as("metadata", _setuptools.prepare_metadata_for_build_editable)
build_sdist = _as("sdist", _setuptools.build_sdist)
build_wheel = _as("wheel", _setuptools.build_wheel)
build_editable = _as("editable", _setuptools.build_editable)
