"""What both tinygrad lines' toolchain glue shares (refimpl.tinygrad.v0_10.toolchain, refimpl.tinygrad.v0_14.toolchain):
the flags zig's clang needs so that tinygrad's ELF loaders take its objects, and the libOpenCL that pyopencl loaded
(the measured facts behind both are in refimpl.tinygrad.v0_10.toolchain's docstring). Imports no tinygrad."""
from __future__ import annotations

import ctypes.util
import glob
import os
import pathlib
from typing import Any

# -g0: no debug relocations (tinygrad's loader rejects R_X86_64_64 in .rela.debug_info); no unwind tables: no .eh_frame,
# whose relocation tinygrad's loader would apply over the kernel's first bytes.
ZIG_EXTRA_FLAGS = ("-g0", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables")


def pyopencl_libopencl(cl: Any) -> str | None:
  """The path of the libOpenCL that pyopencl loaded (from /proc/self/maps), else the one its wheel bundles, else the
  system's."""
  try: maps = pathlib.Path("/proc/self/maps").read_text().splitlines()
  except OSError: maps = []
  for line in maps:
    path = line.split()[-1] if line.split() else ""
    if os.path.basename(path).startswith("libOpenCL") and os.path.exists(path): return path
  here = os.path.dirname(os.path.abspath(cl.__file__))
  bundled = sorted(glob.glob(os.path.join(here, ".libs", "libOpenCL*")) + glob.glob(os.path.join(here + ".libs", "libOpenCL*")))
  return bundled[0] if bundled else ctypes.util.find_library("OpenCL")
