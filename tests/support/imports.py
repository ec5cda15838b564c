"""Which modules a fresh interpreter holds after running some code: for the tests that keep imports light."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterable

__all__ = ["modules_loaded_by"]


def modules_loaded_by(code: str, modules: Iterable[str]) -> list[str]:
    """Those of ``modules`` (in the order given) that running ``code`` in a new interpreter imported."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps([m for m in {list(modules)!r} if m in sys.modules]))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120)
    return json.loads(done.stdout.strip().splitlines()[-1])
