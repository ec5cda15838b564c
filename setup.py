"""Build script: compiles the span-to-trajectory mapper, the SDK span converter and the criteria's sequence matching
and argument comparison with mypyc, and the tool-call comparison's C twin (``src/tracegrade/criteria/_call_compare.c``);
everything else is declared in pyproject.toml.

The mapper runs for every span tracegrade sees (live capture, the receiver's rebuilds, offline grading), the
sequence matching for every trajectory and node-order criterion of every graded case. Compiled, they map more spans
and grade more cases per second (figures: bench/RESULTS.md, bench_mapper, bench_criteria). The compiled
modules behave exactly as their Python source, which stays in the package and is what runs when no
extension was built.

``TRACEGRADE_COMPILE`` chooses:
  * unset: compile for wheels and regular installs; editable installs (``pip install -e``) stay pure
    Python, so edits take effect at once; a failed compile (no C compiler) falls back to pure Python with
    a warning;
  * ``1``: compile, editable installs too (the extensions land beside the sources: reinstall after editing
    a compiled module), and fail the build if compiling fails (CI does this);
  * ``0``: never compile.

Which build this is comes from ``TRACEGRADE_BUILD``, set by the build backend (build_backend/tracegrade_build.py)
for each PEP 517 hook: ``wheel``, ``editable``, or ``metadata``/``sdist``, which never compile. Run directly
(``python setup.py build_ext --inplace``), setup.py builds as for a wheel.
"""

from __future__ import annotations

import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

COMPILED_PACKAGES = ("src/tracegrade/trajectory",)
COMPILED_MODULES = (
    "src/tracegrade/capture/sdk_convert.py",
    "src/tracegrade/criteria/sequence_match.py",
    "src/tracegrade/criteria/tool_args.py",
    "src/tracegrade/criteria/tool_calls.py",
)
# compiled by earlier versions: extensions an earlier editable install left beside them would shadow their source
RETIRED_MODULES = ("src/tracegrade/models/json_values.py",)
GROUP = "tracegrade"  # the shared library of the compiled modules is ``tracegrade__mypyc``
C_EXTENSIONS = {"tracegrade.criteria._call_compare": "src/tracegrade/criteria/_call_compare.c"}


def _compile_setting() -> str:
    value = os.environ.get("TRACEGRADE_COMPILE", "").strip().lower()
    if value not in ("", "0", "1"):
        sys.exit(f"TRACEGRADE_COMPILE={value!r}: use 1 (compile, fail if it cannot), 0 (never) or leave it unset")
    return value


def _build_kind() -> str:
    kind = os.environ.get("TRACEGRADE_BUILD", "wheel")
    if kind not in ("wheel", "editable", "metadata", "sdist"):
        sys.exit(f"TRACEGRADE_BUILD={kind!r}: the build backend sets it to wheel, editable, metadata or sdist")
    return kind


def _sources() -> list[str]:
    files = [str(path) for package in COMPILED_PACKAGES for path in sorted(Path(package).glob("*.py"))]
    return files + list(COMPILED_MODULES)


def _remove_compiled_in_place() -> None:
    """Delete extensions an earlier ``TRACEGRADE_COMPILE=1`` editable install left beside the sources: they
    would shadow the Python source of an install that is meant to run it."""
    sources = _sources() + list(C_EXTENSIONS.values())
    stale = [Path(source).with_suffix(suffix) for source in sources for suffix in EXTENSION_SUFFIXES]
    stale += _retired()
    stale += [path for suffix in EXTENSION_SUFFIXES for path in Path("src").glob(f"{GROUP}__mypyc{suffix}")]
    for path in stale:
        path.unlink(missing_ok=True)


def _retired() -> list[Path]:
    return [Path(source).with_suffix(suffix) for source in RETIRED_MODULES for suffix in EXTENSION_SUFFIXES]


class _OptionalBuildExt(build_ext):
    """Builds the compiled modules; unless compiling is required, a failure leaves the pure-Python package."""

    required = False

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:
            if self.required:
                raise
            for output in self.get_outputs():
                Path(output).unlink(missing_ok=True)
            _warn_pure(exc)


def _extensions(setting: str, kind: str) -> list:
    if kind in ("metadata", "sdist"):
        return []
    if setting == "0" or (setting == "" and kind == "editable"):
        _remove_compiled_in_place()
        return []
    for path in _retired():
        path.unlink(missing_ok=True)
    try:
        from mypyc.build import mypycify

        compiled = mypycify(_sources(), opt_level="3", debug_level="0", group_name=GROUP)
        return compiled + [Extension(name, [source]) for name, source in C_EXTENSIONS.items()]
    except (Exception, SystemExit) as exc:
        if setting == "1":
            raise
        _warn_pure(exc)
        return []


def _warn_pure(reason: BaseException) -> None:
    print(
        f"warning: tracegrade could not be compiled and is installed as pure Python (same results, slower mapping): "
        f"{reason}",
        file=sys.stderr,
    )


_setting = _compile_setting()
_OptionalBuildExt.required = _setting == "1"
setup(ext_modules=_extensions(_setting, _build_kind()), cmdclass={"build_ext": _OptionalBuildExt})
