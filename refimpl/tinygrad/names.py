"""Kernel names of refimpl programs in tinygrad's sources (refimpl.tinygrad.v0_10.backend, refimpl.tinygrad.v0_10.nvidia)."""
from __future__ import annotations

import re


def kernel_name(name: str) -> str:
  """A C / OpenCL / LLVM / WGSL identifier for a refimpl program name."""
  s = re.sub(r"[^A-Za-z0-9_]", "_", name)
  return s if s and not s[0].isdigit() else f"k_{s}"
