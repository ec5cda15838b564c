"""The public API is typed for users: ``tracegrade.EvalSet`` is the class to a type checker, not ``Any``.

The package's names load lazily (``__getattr__``), which a type checker cannot follow; an
``if TYPE_CHECKING:`` block spells them out. These tests check that the block and the lazy table agree, and
run mypy on a user's snippet to see what it makes of them.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import tracegrade

PACKAGE_ROOT = Path(tracegrade.__file__).parent


def _type_checking_imports(init_file: Path) -> dict[str, str]:
    """``name -> module`` of every import inside the file's ``if TYPE_CHECKING:`` block."""
    tree = ast.parse(init_file.read_text(encoding="utf-8"))
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module, ast.unparse(statement)
                for alias in statement.names:
                    found[alias.asname or alias.name] = statement.module
    return found


def test_the_type_checking_block_names_every_lazy_export_and_its_home() -> None:
    assert _type_checking_imports(PACKAGE_ROOT / "__init__.py") == tracegrade._EXPORTS


def test_the_type_checking_block_reexports_explicitly() -> None:
    # ``from m import X as X``: a checker in --strict (no implicit re-export) sees X as exported, which a
    # computed ``__all__`` cannot tell it
    tree = ast.parse((PACKAGE_ROOT / "__init__.py").read_text(encoding="utf-8"))
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    plain = [a.name for s in block.body if isinstance(s, ast.ImportFrom) for a in s.names if a.asname != a.name]
    assert plain == []


def test_the_store_package_agrees_with_its_type_checking_block() -> None:
    store = importlib.import_module("tracegrade.store")
    homes = {name: f"tracegrade.store.{home}" for name, home in store._HOMES.items()}
    assert _type_checking_imports(PACKAGE_ROOT / "store" / "__init__.py") == homes
    assert sorted(store.__all__) == sorted(homes)


@pytest.mark.parametrize("package", ["tracegrade", "tracegrade.store", "tracegrade.testing"])
def test_every_lazy_name_resolves_and_unknown_names_are_refused(package: str) -> None:
    module = importlib.import_module(package)
    for name in module.__all__:
        assert getattr(module, name) is not None
        assert name in dir(module)
    with pytest.raises(AttributeError, match=f"module {package!r} has no attribute 'no_such_name'"):
        module.no_such_name  # noqa: B018


SNIPPET = """\
import tracegrade
from tracegrade import AgentEvaluator, EvalConfig

reveal_type(tracegrade.EvalSet)
reveal_type(AgentEvaluator)
reveal_type(EvalConfig().criteria)
wrong: int = tracegrade.TraceStore
"""


@pytest.mark.slow
def test_mypy_sees_the_classes_behind_the_lazy_names(tmp_path: Path) -> None:
    (tmp_path / "snippet.py").write_text(SNIPPET, encoding="utf-8")
    # a user's project: strict, its own (empty) config, tracegrade as installed in this environment
    (tmp_path / "mypy.ini").write_text("[mypy]\nstrict = True\nignore_missing_imports = True\n", encoding="utf-8")
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            "mypy.ini",
            "--cache-dir",
            str(tmp_path / "cache"),
            "snippet.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    out = run.stdout + run.stderr
    revealed = [line.split("Revealed type is ", 1)[1] for line in out.splitlines() if "Revealed type is" in line]
    assert len(revealed) == 3, out
    assert "tracegrade.models.dataset.EvalSet" in revealed[0], out
    assert "tracegrade.evaluation.evaluator.AgentEvaluator" in revealed[1], out
    assert "tracegrade.models.config.CriteriaConfig" in revealed[2], out
    # were the names Any, the wrong assignment would pass and nothing would be reported as not exported
    assert 'snippet.py:7: error: Incompatible types in assignment (expression has type "type[TraceStore]"' in out, out
    assert "does not explicitly export" not in out, out
