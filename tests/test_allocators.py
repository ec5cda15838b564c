"""tracegrade serve's allocator settings (tracegrade.ingest.allocators). Each check runs in a fresh
interpreter: the settings change the process, and mimalloc's must come before pyarrow loads."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

_OURS = ("MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_", "MIMALLOC_PURGE_DELAY")
_APPLY = (
    "import json, os, sys, dataclasses\n"
    "{prelude}\n"
    "from tracegrade.ingest.allocators import return_freed_memory_sooner\n"
    "settings = dataclasses.asdict(return_freed_memory_sooner())\n"
    "print(json.dumps({{'settings': settings, 'purge_env': os.environ.get('MIMALLOC_PURGE_DELAY')}}))\n"
)
glibc_only = pytest.mark.skipif(
    platform.system() != "Linux" or platform.libc_ver()[0] != "glibc", reason="mallopt settings are glibc's"
)


def apply_fresh(prelude: str = "", **env: str) -> dict:
    environment = {k: v for k, v in os.environ.items() if k not in _OURS} | env
    code = _APPLY.format(prelude=prelude)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_the_serve_command_loads_no_pyarrow_before_its_settings() -> None:
    code = "import sys, tracegrade.cli.main, tracegrade.cli.serve; print('pyarrow' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


@glibc_only
def test_settings_applied_in_a_fresh_process() -> None:
    out = apply_fresh()
    assert out["settings"] == {"arena_max": 2, "trim_threshold": 1024 * 1024, "mimalloc_purge_delay": "0"}
    assert out["purge_env"] == "0"  # inherited by the mapping child


@glibc_only
def test_values_from_the_environment_are_kept() -> None:
    out = apply_fresh(MALLOC_ARENA_MAX="4", MALLOC_TRIM_THRESHOLD_="65536", MIMALLOC_PURGE_DELAY="25")
    assert out["settings"] == {"arena_max": None, "trim_threshold": None, "mimalloc_purge_delay": None}
    assert out["purge_env"] == "25"


def test_mimalloc_is_left_alone_once_pyarrow_is_loaded() -> None:
    out = apply_fresh(prelude="import pyarrow")
    assert out["settings"]["mimalloc_purge_delay"] is None and out["purge_env"] is None
