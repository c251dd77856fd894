"""Deliberately broken backends: the CLANG device with one planted bug each, to test the fuzzer (and to watch it work:
`python -m refimpl.fuzz --backend refimpl.fuzz.planted:FloorDivClang --iterations 200`).

  FloorDivClang   IDIV on signed ints rounds toward minus infinity (Python's //) instead of toward zero
  NanMaxClang     float MAX is (a > b ? a : b): a NaN first operand is dropped (max(NaN, 1) = 1)
  SegfaultClang   kernels whose program has a float CMPNE write through a null pointer (SIGSEGV)
  HangClang       kernels whose program has a float CMPNE spin forever

They subclass whatever class is registered as CLANG (never importing a backend module by path), render with a subclass
of its renderer, and are subprocess-safe, so the fuzzer's spawned workers open them by "refimpl.fuzz.planted:<Class>".
"""
from __future__ import annotations

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.ir import Ops, Program

_Clang = Device.device_class("CLANG")


def _float_cmpne(program: Program) -> bool:
  return any(u.op is Ops.CMPNE and dtypes.is_float(program.uops[u.src[0]].dtype) for u in program.uops)


def _renderer(base: type, alu=None, tail=None) -> type:
  """A subclass of renderer class `base` whose alu() may be replaced per op and whose kernels may get a tail statement."""
  def alu_fn(self, op, dt, src, src_dt):
    if alu is not None and (text := alu(op, dt, src, src_dt)) is not None: return text
    return base.alu(self, op, dt, src, src_dt)
  def render(self, name: str, program: Program) -> str:
    src = base.render(self, name, program)
    if tail is not None and (stmt := tail(program)) is not None:
      cut = src.rstrip().rfind("}")
      src = src[:cut] + f"  {stmt}\n}}\n"
    return src
  return type(f"Planted{base.__name__}", (base,), {"alu": alu_fn, "render": render})


class _Planted(_Clang):
  subprocess_safe = True
  name = "PLANTED"
  alu = None
  tail = None
  def __init__(self, device: str | None = None):
    super().__init__(device or self.name)
    self.renderer = _renderer(type(self.renderer), type(self).alu, type(self).tail)(device or self.name)


def _floor_idiv(op, dt, src, src_dt):
  if op is Ops.IDIV and src_dt in dtypes.sints:
    a, b = src
    return f"(({a}/{b})-((({a}%{b})!=0)&&((({a})<0)!=(({b})<0))))"
  return None

def _nan_dropping_max(op, dt, src, src_dt):
  if op is Ops.MAX and dtypes.is_float(src_dt) and src_dt in (dtypes.float32, dtypes.float64):
    return f"({src[0]}>{src[1]}?{src[0]}:{src[1]})"
  return None


class FloorDivClang(_Planted):
  name = "FLOORDIVCLANG"
  alu = staticmethod(_floor_idiv)

class NanMaxClang(_Planted):
  name = "NANMAXCLANG"
  alu = staticmethod(_nan_dropping_max)

class SegfaultClang(_Planted):
  name = "SEGFAULTCLANG"
  tail = staticmethod(lambda p: "*(volatile int*)0 = 0;" if _float_cmpne(p) else None)

class HangClang(_Planted):
  name = "HANGCLANG"
  tail = staticmethod(lambda p: "for (;;) __asm__ volatile(\"\");" if _float_cmpne(p) else None)


__all__ = ["FloorDivClang", "HangClang", "NanMaxClang", "SegfaultClang"]
