"""How a process that emulates gets memory for the emulator's values (the PYTHON and REFIMPL devices).

A run makes a new numpy array for every value it computes, and a loop run as lanes makes them by the megabyte. glibc's
malloc serves a block above its mmap threshold (128 KiB at first, raised as large blocks are freed) with a fresh mmap,
whose pages the kernel faults in and zeroes one at a time, and gives freed heap back to the kernel above its trim
threshold, to be faulted in again by the next run. Measured on tinygrad 0.10.1's 256x256 matmul kernel
(bench/bench_real_kernels.py, CPU time of one run): about 130 ms with glibc's defaults, about 50 ms with blocks of up to
64 MiB served from the heap and up to 256 MiB of freed heap kept for reuse.

`reuse_freed_memory()` sets those two thresholds (mallopt M_MMAP_THRESHOLD, M_TRIM_THRESHOLD) once per process, on glibc
only; the PYTHON device (refimpl.backends.ops_python) and tinygrad's REFIMPL device call it when they open (emulate
itself, the spec, leaves the process alone). The cost is memory: up to 256 MiB the process has freed stays mapped.
REFIMPL_MALLOC=default in the environment leaves malloc as it is.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's <malloc.h>
MMAP_THRESHOLD = 64 << 20
TRIM_THRESHOLD = 256 << 20


@functools.cache
def reuse_freed_memory() -> bool:
  """Sets glibc malloc's thresholds as the module docstring says; whether it did (False: not glibc, or opted out)."""
  if os.environ.get("REFIMPL_MALLOC") == "default": return False
  name = ctypes.util.find_library("c")
  if name is None: return False
  try: libc = ctypes.CDLL(name)
  except OSError: return False
  if not hasattr(libc, "mallopt") or not hasattr(libc, "gnu_get_libc_version"): return False  # glibc's mallopt only
  return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
