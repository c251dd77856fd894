"""The TRUNC decomposition (refimpl/lower/trunc.py), for targets with no TRUNC (refimpl's C and LLVM IR, tinygrad
0.10.1): the decomposed program verifies, holds no TRUNC, is defined for every input (the emulator runs it strictly),
and gives TRUNC's rule bit for bit (refimpl.emulator.alu.trunc, which spec_tests/semantics/test_trunc.py states)."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.backends.cstyle import CStyleRenderer
from refimpl.backends.cuda import CUDARenderer
from refimpl.backends.llvmir import LLVMRenderer
from refimpl.backends.opencl import OpenCLRenderer
from refimpl.backends.ops_clang import ClangRenderer
from refimpl.backends.wgsl import WGSLRenderer
from refimpl.dtype import dtypes, to_np
from refimpl.emulator.machine import emulate
from refimpl.errors import CompileError
from refimpl.ir import Ops, ProgramBuilder, elementwise
from refimpl.lower import decompose_trunc, lower_for, lower_grid_to_loops, passes_for
from refimpl.spec import short_name
from refimpl.testing.oracle import FMT, edge_bits, from_bits, random_bits

FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)

def interesting(dt) -> np.ndarray:
  """Edge values, values around 2^M (M the stored mantissa bits: from there on every value is an integer) and
  halves, subnormals of both signs, random bit patterns."""
  big = 2.0 ** (FMT[dt].p - 1)
  around = [big - 0.5, big, big + 1, big + 2, 0.5, 1.5, 2.5, 0.99609375, big / 2 + 0.5]
  extra = np.array(around + [-v for v in around], np.float64).astype(FMT[dt].np)
  return np.concatenate([from_bits(edge_bits(dt), dt), extra, random_bits(dt, 2000, 17)])

def same_bits(got: np.ndarray, want: np.ndarray) -> bool:
  """Bit for bit, every NaN one value (the rule leaves a NaN's payload open)."""
  with np.errstate(invalid="ignore"): g, w = got.astype(np.float64), want.astype(np.float64)
  return bool(np.all((np.isnan(g) & np.isnan(w)) | ((g == w) & (np.signbit(g) == np.signbit(w)))))

@pytest.mark.parametrize("dt", FLOATS, ids=short_name)
def test_decomposition_gives_the_trunc_rule_bit_for_bit(dt):
  """TRUNC rule: round toward zero, the sign kept, +-inf and NaN themselves; the decomposed kernel's output equals the
  rule's on edge values, values around 2^M and random bit patterns, and it runs strictly (defined on every lane)."""
  x = interesting(dt)
  p = elementwise(Ops.TRUNC, dt, n=len(x))
  lowered = decompose_trunc(p)
  assert Ops.TRUNC not in {u.op for u in lowered.uops}
  want = emulate(p, [np.zeros_like(x), x]).buffers[0]
  got = emulate(lowered, [np.zeros_like(x), x]).buffers[0]
  assert same_bits(got, want)

@pytest.mark.parametrize("dt", FLOATS, ids=short_name)
def test_c_lowering_of_trunc_gives_the_rule(dt):
  """TRUNC rule, after every pass C needs (lower_for for CStyleRenderer: the decomposition, then the narrow lowering
  and the poison guard on what it wrote): the program C renders computes the rule's bits."""
  x = interesting(dt)
  p = elementwise(Ops.TRUNC, dt, n=len(x))
  assert decompose_trunc in passes_for(CStyleRenderer("CLANG"))
  lowered = lower_for(p, CStyleRenderer("CLANG"))
  assert Ops.TRUNC not in {u.op for u in lowered.uops}
  want = emulate(p, [np.zeros(len(x), to_np(dt)), x]).buffers[0]
  got = emulate(lowered, [np.zeros(len(x), to_np(dt)), x]).buffers[0]
  assert same_bits(got, want)

def test_decomposition_of_a_vector_trunc_works_lane_by_lane():
  """TRUNC on float32.vec(2) is the rule on each lane: the lowering's constants are VECTORIZEd to the width."""
  b = ProgramBuilder("trunc_vec")
  out, xs = b.global_buf(dtypes.float32, 8), b.global_buf(dtypes.float32, 8)
  i = b.alu(Ops.MUL, b.gidx(0, 4), b.const(2, dtypes.int32))
  b.store(out, i, b.alu(Ops.TRUNC, b.load(xs, i, count=2)))
  p = b.build()
  x = np.array([-0.5, 2.5, -2.5, 8388607.5, np.inf, np.nan, -1e-45, 3.0], np.float32)
  want = emulate(p, [np.zeros(8, np.float32), x]).buffers[0]
  got = emulate(decompose_trunc(p), [np.zeros(8, np.float32), x]).buffers[0]
  assert same_bits(got, want)

def test_a_program_without_trunc_comes_back_unchanged():
  """The pass touches only TRUNC: any other program is returned as it is."""
  p = elementwise(Ops.SQRT, dtypes.float32)
  assert decompose_trunc(p) is p

NATIVE = {  # renderer -> the spelling of a float32 TRUNC it renders natively
  "GPU": (OpenCLRenderer("GPU"), "trunc(v"), "CUDA": (CUDARenderer(), "truncf(v"),
  "WEBGPU": (WGSLRenderer("WEBGPU"), "rf_r(rf_trunc(rf_a(v"),
  "LLVM": (LLVMRenderer("LLVM", native_trunc=True), "@llvm.trunc.f32(")}

@pytest.mark.parametrize("name", sorted(NATIVE))
def test_trunc_renders_natively_where_the_backend_has_it(name):
  """TRUNC rule, rendered: OpenCL C's trunc, CUDA's truncf, WGSL's rf_trunc (through its opacity helpers) and, on a target
  that rounds in one instruction, LLVM's llvm.trunc; lower_for leaves their TRUNC alone."""
  renderer, spelling = NATIVE[name]
  lowered = lower_for(elementwise(Ops.TRUNC, dtypes.float32, n=4), renderer)
  assert Ops.TRUNC in {u.op for u in lowered.uops}
  assert spelling in renderer.render("k", lowered)

@pytest.mark.parametrize("renderer", [ClangRenderer("CLANG"), LLVMRenderer("LLVM")], ids=lambda r: r.device)
def test_trunc_is_decomposed_where_the_target_may_lack_it(renderer):
  """TRUNC rule, for C (truncf is a libm call on an x86-64 without SSE4.1, and the compile may be generic) and LLVM IR
  by default: lower_for writes it with other ops, and the renderer refuses a TRUNC that reaches it."""
  p = elementwise(Ops.TRUNC, dtypes.float32, n=4)
  assert Ops.TRUNC not in {u.op for u in lower_for(p, renderer).uops}
  with pytest.raises(CompileError, match=r"refimpl\.lower\.trunc"):
    renderer.render("k", lower_grid_to_loops(p))
