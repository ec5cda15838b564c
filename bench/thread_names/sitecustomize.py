"""Gives each Python thread started after this its name at the OS level (``/proc/<pid>/task/<tid>/comm``).

bench_lake.py ``--thread-cpu`` puts this directory on the receivers' PYTHONPATH, so their CPU can be read
per thread (the writer, the rebuilder, the decoders) without touching tracegrade. Linux only (prctl).
"""

from __future__ import annotations

import ctypes
import threading

_PR_SET_NAME = 15
_libc = ctypes.CDLL(None)
_bootstrap_inner = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]


def _named_bootstrap(self: threading.Thread) -> None:
    _libc.prctl(_PR_SET_NAME, self.name.removeprefix("tracegrade-")[:15].encode(), 0, 0, 0)
    _bootstrap_inner(self)


threading.Thread._bootstrap_inner = _named_bootstrap  # type: ignore[attr-defined]
