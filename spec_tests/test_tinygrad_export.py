"""refimpl.tinygrad.v0_10.exporter: a refimpl Program as tinygrad 0.10.1 UOps that tinygrad's own renderers take.

Each test states the form tinygrad's renderers expect (the reverse of an importer rule, or a property of tinygrad's
hash-consed UOps) and checks it on the exported list, or runs the export on tinygrad's PYTHON emulator and CLANG and
compares with the spec (refimpl's emulator). Skipped only when tinygrad is not installed."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder, elementwise
from refimpl.lower import lower_grid_to_loops
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value

pytest.importorskip("tinygrad")
from tinygrad.renderer.cstyle import ClangRenderer

from refimpl.tinygrad.v0_10.exporter import ExportError, tinygrad_dtype, to_tinygrad

RUN_ON = ["TINYGRAD:PYTHON", "TINYGRAD:CLANG"]


def _names(uops): return [u.op.name for u in uops]


def _same_as_spec(device, program, inputs, vals=()):
  reason = Device.open_error(device)
  if reason is not None: pytest.skip(reason)
  want = emulate(program, inputs, vals=vals).buffers
  got = Kernel(program, device)(*[a.copy() for a in inputs], vals=vals)
  for g, w in zip(got, want): assert same_value(g, w).all(), f"{device}: got {g!r}, the spec gives {w!r}"


def test_dtypes_map_by_name_and_fp8_has_no_tinygrad_form():
  from tinygrad.dtype import dtypes as tdt
  assert tinygrad_dtype(dtypes.int8) == tdt.int8 and tinygrad_dtype(dtypes.uint64) == tdt.uint64
  assert tinygrad_dtype(dtypes.float32.vec(4)) == tdt.float32.vec(4)
  assert tinygrad_dtype(dtypes.half.ptr(8)) == tdt.half.ptr(8)
  with pytest.raises(ValueError, match="does not exist in tinygrad"): tinygrad_dtype(dtypes.fp8e4m3)


def test_declarations_come_first_in_parameter_order():
  """tinygrad's renderers take the kernel's parameters from the list order: buffers by number, then vars."""
  b = ProgramBuilder("decl")
  out = b.global_buf(dtypes.int32, 4)
  n = b.var("n", 0, 4)
  x = b.global_buf(dtypes.int32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.ADD, b.load(x, i), n))
  p = b.build()
  uops = to_tinygrad(p)
  assert _names(uops)[:3] == ["DEFINE_GLOBAL", "DEFINE_GLOBAL", "DEFINE_VAR"] and [u.arg for u in uops[:2]] == [0, 1]
  src = ClangRenderer().render("decl", to_tinygrad(lower_grid_to_loops(p), ClangRenderer()))
  assert "data0, int* restrict data1, const int n)" in src
  for device in RUN_ON: _same_as_spec(device, p, [np.zeros(4, np.int32), np.arange(4, dtype=np.int32)], vals=(3,))


def test_two_loads_of_one_address_around_a_store_stay_two():
  """tinygrad UOps are hash-consed: without distinct args the second LOAD would be the first (the stale value)."""
  b = ProgramBuilder("reload")
  out, x = b.global_buf(dtypes.int32, 2), b.global_buf(dtypes.int32, 2)
  zero, one = b.const(0, dtypes.int32), b.const(1, dtypes.int32)
  first = b.load(x, zero)
  b.store(x, zero, b.alu(Ops.ADD, first, one))
  b.store(out, zero, b.alu(Ops.ADD, first, b.load(x, zero)))
  p = b.build()
  assert _names(to_tinygrad(p)).count("LOAD") == 2
  for device in RUN_ON: _same_as_spec(device, p, [np.zeros(2, np.int32), np.array([5, 0], np.int32)])


def test_a_gated_store_becomes_if_store_endif():
  """pm_render and tinygrad's linearizer put a masked STORE in an IF block: IF (gate), STORE (.., IF), ENDIF."""
  b = ProgramBuilder("gated")
  out, x = b.global_buf(dtypes.float32, 4), b.global_buf(dtypes.float32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.load(x, i), gate=b.alu(Ops.CMPLT, i, b.const(2, dtypes.int32)))
  uops = to_tinygrad(b.build())
  k = _names(uops).index("STORE")
  gate_if = uops[k].src[2]
  assert gate_if.op.name == "IF" and uops.index(gate_if) < k and _names(uops)[k + 1] == "ENDIF"
  assert uops[k + 1].src == (gate_if,) and gate_if.src[0].op.name == "CMPLT"
  _same_as_spec("TINYGRAD:CLANG", b.build(), [np.zeros(4, np.float32), np.arange(1, 5, dtype=np.float32)])


def test_an_accumulator_lists_its_ranges_and_is_read_through_its_assign_after_the_loop():
  """tinygrad's DEFINE_ACC has src (init, *RANGEs) (its LLVM renderer places the phi by them); after the loop the value
  is the ASSIGN's."""
  b = ProgramBuilder("acc")
  out, x = b.global_buf(dtypes.int32, 1), b.global_buf(dtypes.int32, 8)
  zero = b.const(0, dtypes.int32)
  acc = b.acc(zero)
  with b.loop(8) as r: b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, r)))
  b.store(out, zero, acc)
  p = b.build()
  uops = to_tinygrad(p)
  acc_u = next(u for u in uops if u.op.name == "DEFINE_ACC")
  store = next(u for u in uops if u.op.name == "STORE")
  assert [s.op.name for s in acc_u.src] == ["CONST", "RANGE"] and store.src[1].op.name == "ASSIGN"
  assert _names(uops).index("DEFINE_ACC") < _names(uops).index("RANGE")
  for device in [*RUN_ON, "TINYGRAD:LLVM"]: _same_as_spec(device, p, [np.zeros(1, np.int32), np.arange(8, dtype=np.int32)])


def test_renderer_rewrites_are_tinygrads_own():
  """With a renderer, tinygrad's extra_matcher applies: CLANG renders MAX as CMPLT + WHERE, EXP2 by its xexp2."""
  r = ClangRenderer()
  names = _names(to_tinygrad(lower_grid_to_loops(elementwise(Ops.MAX, dtypes.float32, n=4)), r))
  assert "MAX" not in names and "WHERE" in names and "CMPLT" in names
  assert "EXP2" not in _names(to_tinygrad(lower_grid_to_loops(elementwise(Ops.EXP2, dtypes.float32, n=4)), r))


def test_what_tinygrad_has_no_form_for_is_an_export_error():
  b = ProgramBuilder("fp8")
  out, x = b.global_buf(dtypes.fp8e4m3, 4), b.global_buf(dtypes.fp8e4m3, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.load(x, i))
  with pytest.raises(ExportError, match="does not exist in tinygrad"): to_tinygrad(b.build())


@pytest.mark.parametrize(("device", "dt"), [("TINYGRAD:PYTHON", dtypes.float32), ("TINYGRAD:CLANG", dtypes.float32),
                                           ("TINYGRAD:CLANG", dtypes.float16)], ids=["PYTHON-f32", "CLANG-f32", "CLANG-f16"])
def test_trunc_exports_as_the_shared_decomposition_and_keeps_the_rule(device, dt):
  """TRUNC rule (round toward zero, the sign kept, NaN and +-inf themselves) on tinygrad 0.10.1, which has no TRUNC:
  the export holds refimpl.lower.trunc's ops (CASTs through int64, WHERE) and runs to the rule's values."""
  p = elementwise(Ops.TRUNC, dt, n=12)
  names = _names(to_tinygrad(lower_grid_to_loops(p)))
  assert "TRUNC" not in names and "WHERE" in names and names.count("CAST") >= 2
  x = np.array([-0.5, 2.5, -2.5, 1023.5, -1023.5, 1024.0, 0.99951171875, -6e-8, np.inf, -np.inf, np.nan, -0.0],
               np.float16 if dt is dtypes.float16 else np.float32)
  _same_as_spec(device, p, [np.zeros(12, x.dtype), x])
