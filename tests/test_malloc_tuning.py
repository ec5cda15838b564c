"""The receiver fixes glibc's mmap threshold: a 1.5 MiB block (a large gRPC request body) that the heap has
no room for comes from ``mmap`` even after a larger block has been freed, which slides the threshold up.

Checked in a child process (the setting is process-wide) through glibc's ``mallinfo2`` counters."""

from __future__ import annotations

import json
import platform
import subprocess
import sys

import pytest

PROBE = r"""
import ctypes, json
from tracegrade.ingest.malloc_tuning import fix_malloc_thresholds

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = MallInfo2
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = (ctypes.c_void_p,)
SIZE = 3 << 19  # 1.5 MiB

def mmapped_block():
    before = libc.mallinfo2().hblkhd
    block = libc.malloc(SIZE)  # kept: the next one cannot reuse its space
    return libc.mallinfo2().hblkhd - before >= SIZE

libc.free(libc.malloc(8 << 20))  # an mmapped 8 MiB block freed: glibc slides its threshold up to 8 MiB
sliding = mmapped_block()
fixed = fix_malloc_thresholds()
print(json.dumps({"sliding": sliding, "fixed": fixed, "after": mmapped_block()}))
"""


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="the setting is glibc's")
def test_large_blocks_come_from_mmap_once_the_threshold_is_fixed() -> None:
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    result = json.loads(probe.stdout)
    assert result == {"sliding": False, "fixed": True, "after": True}
