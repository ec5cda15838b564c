"""The build: a plain editable install neither compiles nor needs mypy; wheels and TRACEGRADE_COMPILE=1 do.

Each PEP 517 hook runs as pip runs it, in a fresh process of the backend pyproject.toml declares, on a copy of
the tree (so nothing is built in the checkout). Compiling starts by importing mypyc (setup.py's ``mypycify``);
a hook that imported it would have compiled, which takes minutes and gigabytes for the mapper.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")

REPO = Path(__file__).resolve().parent.parent
_HOOK = """
import json, sys
sys.path[:0] = {paths!r}
import importlib
backend = importlib.import_module({backend!r})
result = getattr(backend, {hook!r})(*{args!r})
print(json.dumps({{"result": result, "mypyc": "mypyc" in sys.modules}}))
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a source checkout holds, without extensions or caches left in ``src`` by other builds."""
    root = tmp_path_factory.mktemp("tree")
    for name in ("pyproject.toml", "setup.py", "README.md", "MANIFEST.in"):
        if (REPO / name).exists():
            shutil.copy(REPO / name, root / name)
    if (REPO / "build_backend").exists():
        shutil.copytree(REPO / "build_backend", root / "build_backend", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"))
    return root


def _hook(tree: Path, hook: str, *args: object, compile_setting: str | None = None) -> tuple[object, bool]:
    """Run one backend hook in its own process; its result, and whether it imported mypyc."""
    system = tomllib.loads((tree / "pyproject.toml").read_text())["build-system"]
    paths = [str(tree / path) for path in system.get("backend-path", [])]
    env = {key: value for key, value in os.environ.items() if key not in ("TRACEGRADE_COMPILE", "TRACEGRADE_BUILD")}
    if compile_setting is not None:
        env["TRACEGRADE_COMPILE"] = compile_setting
    code = _HOOK.format(paths=paths, backend=system["build-backend"], hook=hook, args=list(args))
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"{hook} failed:\n{done.stderr[-3000:]}"
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return answer["result"], answer["mypyc"]


def _needs_mypy(requires: object) -> bool:
    assert isinstance(requires, list)
    return any(str(requirement).startswith("mypy") for requirement in requires)


@pytest.mark.slow
def test_plain_editable_install_neither_needs_mypy_nor_compiles(tree: Path, tmp_path: Path) -> None:
    (tree / f"src/tracegrade/trajectory/readers{EXTENSION_SUFFIXES[0]}").write_bytes(b"left by a compiled install")
    requires, imported = _hook(tree, "get_requires_for_build_editable", {})
    assert not _needs_mypy(requires) and not imported
    (tmp_path / "meta").mkdir()
    _, imported = _hook(tree, "prepare_metadata_for_build_editable", str(tmp_path / "meta"))
    assert not imported
    (tmp_path / "wheel").mkdir()
    name, imported = _hook(tree, "build_editable", str(tmp_path / "wheel"))
    assert not imported
    with zipfile.ZipFile(tmp_path / "wheel" / str(name)) as wheel:
        assert not [entry for entry in wheel.namelist() if entry.endswith(".so")]
    assert not list((tree / "src").rglob("*.so")), "an extension left beside the sources would shadow them"


@pytest.mark.slow
def test_compiled_editable_install_and_wheels_ask_for_mypy(tree: Path, tmp_path: Path) -> None:
    requires, imported = _hook(tree, "get_requires_for_build_editable", {}, compile_setting="1")
    assert _needs_mypy(requires) and not imported
    requires, imported = _hook(tree, "get_requires_for_build_wheel", {})
    assert _needs_mypy(requires) and not imported
    requires, imported = _hook(tree, "get_requires_for_build_wheel", {}, compile_setting="0")
    assert not _needs_mypy(requires) and not imported
    # the metadata step of a compiled install still does not compile (the build step does)
    _, imported = _hook(tree, "prepare_metadata_for_build_editable", str(tmp_path), compile_setting="1")
    assert not imported
