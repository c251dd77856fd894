"""Backends with a planted float32 SQRT bug, for the sweep's tests (spec_tests/test_sweep.py), opened by spawned workers
as "sweep_planted:<Class>" (spec_tests/third_party on PYTHONPATH):
  SqrtUlpClang    CLANG whose float32 SQRT is multiplied by 1.0000001f: one ulp above the correctly rounded root on most inputs
  SqrtCrashClang  CLANG whose float32 SQRT reads through a null pointer: the kernel kills its process (SIGSEGV)
  SlowClang       CLANG, right, whose every launch first waits 50 ms: a sweep of thousands of chunks lasts minutes on any
                  machine, so the interruption tests always stop it midway
  HangClang       CLANG whose every launch waits an hour: a hung backend"""
import time

from refimpl.backends.ops_clang import ClangDevice, ClangProgram
from refimpl.dtype import dtypes
from refimpl.fuzz.planted import planted_device
from refimpl.ir import Ops


def _sqrt_one_ulp_up(op, dt, src, src_dt):
  return f"(__builtin_sqrtf({src[0]})*1.0000001f)" if op is Ops.SQRT and src_dt == dtypes.float32 else None

SqrtUlpClang = planted_device("CLANG", "SqrtUlpClang", alu=_sqrt_one_ulp_up)

def _sqrt_segfault(op, dt, src, src_dt):
  return f"({src[0]}+*(volatile float*)0)" if op is Ops.SQRT and src_dt == dtypes.float32 else None

SqrtCrashClang = planted_device("CLANG", "SqrtCrashClang", alu=_sqrt_segfault)


class _SlowProgram(ClangProgram):
  def __call__(self, *args, **kwargs):
    time.sleep(0.05)
    return super().__call__(*args, **kwargs)

class _HangProgram(ClangProgram):
  def __call__(self, *args, **kwargs):
    time.sleep(3600)
    return super().__call__(*args, **kwargs)

class HangClang(ClangDevice):
  """CLANG whose every launch waits an hour (see the module docstring)."""
  subprocess_safe = True
  def __init__(self, device: str = "HANGCLANG"):
    super().__init__(device)
    self.runtime = _HangProgram

class SlowClang(ClangDevice):
  """CLANG whose every launch waits 50 ms first (see the module docstring)."""
  subprocess_safe = True
  def __init__(self, device: str = "SLOWCLANG"):
    super().__init__(device)
    self.runtime = _SlowProgram
