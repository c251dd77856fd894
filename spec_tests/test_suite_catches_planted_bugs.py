"""Who checks the checker: the differential suite must catch real backend bugs and shrink them to one-lane reproducers.

Each planted backend is the CLANG device with one deliberately wrong rendering rule. The suite's own machinery
(refimpl.testing.differential) runs against it: the sweep must flag the case, and hypothesis must shrink a failing batch
to a single lane whose reproducer names the op, the dtypes, expected and got values, and a one-line replay."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, find, settings

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.ir import Ops, Program
from refimpl.ir.rewrite import copy, rewrite
from refimpl.lower.emit import Values
from refimpl.testing.differential import OpCase, OpHarness, sweep_inputs

clang = pytest.importorskip("refimpl.backends.ops_clang")
if Device.open_error("CLANG") is not None: pytest.skip(f"planted bugs are CLANG variants: {Device.open_error('CLANG')}",
                                                     allow_module_level=True)

def truncating_half_cast(b, i, u, src):
  """A float -> half CAST truncating: rounded to nearest even, then one step toward zero (the bits minus 1) where that
  moved away from x (a rewrite handler: other CASTs are copied)."""
  s = b.dtype(src[0]).scalar()
  if s not in (dtypes.float32, dtypes.float64) or u.dtype.scalar() != dtypes.float16: return copy(b, i, u, src)
  x = Values(b, u.dtype.count).of(src[0], s).cast(dtypes.float64)
  h = x.cast(dtypes.float16)
  back = h.cast(dtypes.float64)
  away = (x.c(0).lt(x) & x.lt(back)) | (x.lt(0) & back.lt(x))
  return away.where((h.bitcast(dtypes.uint16) - 1).bitcast(dtypes.float16), h).i

def truncating_half_casts(program: Program) -> Program:
  """The program with every float -> half CAST truncating (truncating_half_cast). Planted in the IR, before the narrow
  lowering writes the casts out."""
  return rewrite(program, {Ops.CAST: truncating_half_cast})

class FloorDivisionRenderer(clang.ClangRenderer):
  """IDIV rounds toward minus infinity (Python's //) instead of truncating."""
  def alu(self, op, dt, src, src_dt):
    if op is Ops.IDIV and dtypes.is_int(src_dt) and not dtypes.is_unsigned(src_dt):
      a, b = src
      return f"(({a}/{b}) - ((({a}%{b})!=0) & ((({a})<0)!=(({b})<0))))"
    return super().alu(op, dt, src, src_dt)

class NanDroppingMaxRenderer(clang.ClangRenderer):
  """MAX on floats is a plain a > b ? a : b, which returns b when a is NaN."""
  def alu(self, op, dt, src, src_dt):
    if op is Ops.MAX and dtypes.is_float(src_dt): return f"({src[0]}>{src[1]}?{src[0]}:{src[1]})"
    return super().alu(op, dt, src, src_dt)

class TruncatingHalfCastRenderer(clang.ClangRenderer):
  """float -> half truncates toward zero instead of rounding to nearest even."""
  def extra_rewrite(self, program): return super().extra_rewrite(truncating_half_casts(program))

class LogicalSignedShiftRenderer(clang.ClangRenderer):
  """SHR on signed ints shifts in zeros (logical) instead of copies of the sign bit (arithmetic)."""
  def alu(self, op, dt, src, src_dt):
    if op is Ops.SHR and dtypes.is_int(src_dt) and not dtypes.is_unsigned(src_dt):
      unsigned = {dtypes.int8: dtypes.uint8, dtypes.int16: dtypes.uint16, dtypes.int32: dtypes.uint32,
                  dtypes.int64: dtypes.uint64}
      return f"(({self.types[dt]})(({self.types[unsigned[src_dt]]}){src[0]}>>{src[1]}))"
    return super().alu(op, dt, src, src_dt)

def planted_device(renderer_cls):
  class PlantedDevice(clang.ClangDevice):
    def __init__(self, device: str):
      super().__init__(device)
      self.renderer = renderer_cls(device)
  return PlantedDevice

PLANTED = {
  "PLANTED_FLOORDIV": (FloorDivisionRenderer, OpCase(Ops.IDIV, dtypes.int8)),
  "PLANTED_NANMAX": (NanDroppingMaxRenderer, OpCase(Ops.MAX, dtypes.float32)),
  "PLANTED_TRUNCHALF": (TruncatingHalfCastRenderer, OpCase(Ops.CAST, dtypes.float32, dtypes.float16)),
  "PLANTED_LOGICALSHR": (LogicalSignedShiftRenderer, OpCase(Ops.SHR, dtypes.int16)),
}

@pytest.fixture(scope="module", params=sorted(PLANTED))
def planted(request):
  renderer_cls, case = PLANTED[request.param]
  Device.register(request.param, planted_device(renderer_cls))
  return request.param, case, OpHarness(request.param, case, lanes=256)

def test_the_sweep_reports_every_planted_bug(planted):
  name, case, _ = planted
  inputs = sweep_inputs(case)
  verdict = OpHarness(name, case).check(inputs)
  assert not verdict.ok and verdict.bad.sum() > 0

def _lanes(case: OpCase):
  from hypothesis import strategies as st

  from refimpl.testing.values import value_strategy
  return st.lists(st.tuples(*(value_strategy(dt) for dt in case.input_dtypes)), min_size=1, max_size=64).map(
    lambda rows: [np.array([r[k] for r in rows]) for k in range(len(case.input_dtypes))])

def test_hypothesis_shrinks_every_planted_bug_to_one_lane_with_a_reproducer(planted):
  name, case, h = planted
  shrunk = find(_lanes(case), lambda inputs: not h.check(inputs).ok,
                settings=settings(max_examples=2000, database=None, suppress_health_check=list(HealthCheck)))
  assert len(shrunk[0]) == 1
  verdict = h.check(shrunk)
  report = h.failure_report(shrunk, verdict)
  assert report.startswith("1 of 1 defined lanes differ from the spec")
  assert f"{name}: {case.op.name} on {case.dtype!r}" in report and "expected:" in report and "got     :" in report
  assert f"eval_op(Ops.{case.op.name}" in report and f"device='{name}'" in report

def test_the_unplanted_clang_device_passes_the_same_cases():
  for _, case in PLANTED.values():
    assert OpHarness("CLANG", case).check(sweep_inputs(case)).ok, case.id
