"""GPU variants of the fuzzer's planted backends, for measuring the fuzzer on the GPU device (bench_fuzz.py --reduce):

  RelaxedMathGPU  the GPU device built with -cl-fast-relaxed-math (what a driver's fast-math default does)
  FloorDivGPU     IDIV on signed ints rounds toward minus infinity instead of toward zero

Measurement only (the suite's planted backends are refimpl/fuzz/planted.py). Workers open them as "planted_gpu:<Class>"
with this folder on sys.path (bench_fuzz.py puts it there; spawned workers inherit it).
"""
from __future__ import annotations

import dataclasses

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.ir import Ops

_GPU = Device.device_class("GPU")


class RelaxedMathGPU(_GPU):
  """The GPU device with -cl-fast-relaxed-math added to its build options (and a compiler keyed by them)."""
  subprocess_safe = True
  def __init__(self, device: str = "RELAXEDMATHGPU"):
    super().__init__(device)
    self.options = (*self.options, "-cl-fast-relaxed-math")
    self.compiler = type(self.compiler)(self)


def _floor_idiv_renderer(base: type) -> type:
  def alu(self, op, dt, src, src_dt):
    if op is Ops.IDIV and src_dt in dtypes.sints:
      a, b = src
      return f"(({a}/{b})-((({a}%{b})!=0)&&((({a})<0)!=(({b})<0))))"
    return base.alu(self, op, dt, src, src_dt)
  return type(f"FloorDiv{base.__name__}", (base,), {"alu": alu})


class FloorDivGPU(_GPU):
  """The GPU device whose renderer floors signed IDIV."""
  subprocess_safe = True
  def __init__(self, device: str = "FLOORDIVGPU"):
    super().__init__(device)
    r = self.renderer
    self.renderer = _floor_idiv_renderer(type(r))(**{f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.init})


__all__ = ["FloorDivGPU", "RelaxedMathGPU"]
