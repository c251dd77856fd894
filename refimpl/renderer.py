"""What a backend tells the rest of refimpl about itself: its renderer and its capabilities."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Renderer:
  """Turns a verified Program into the source text a backend's Compiler takes, and describes the backend.

  Capabilities (read by lowering passes, the test suite and the fuzzer):
    device        the device name the renderer is for
    has_local     the backend has workgroups: SPECIAL lidx, DEFINE_LOCAL and BARRIER
    has_shared    DEFINE_LOCAL memory exists (implies has_local)
    global_max    the largest global size per dimension, or None when the backend has no grid (loops instead)
    local_max     the largest local size per dimension, or None
    vector_widths the vector counts the backend renders natively (others are scalarized)
    flushes_subnormals  float results that would be subnormal come back as zero
    supported_dtypes    the scalar dtypes the backend computes with and stores, or None for all of them
  """
  device: str = "NONE"
  has_local: bool = False
  has_shared: bool = False
  global_max: tuple[int, ...] | None = None
  local_max: tuple[int, ...] | None = None
  vector_widths: tuple[int, ...] = (1,)
  flushes_subnormals: bool = False
  supported_dtypes: frozenset | None = None
  inexact_ops: frozenset = frozenset()

  def render(self, name: str, program) -> str:
    raise NotImplementedError(f"{type(self).__name__} cannot render programs")
