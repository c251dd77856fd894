"""The WMMA decomposition (refimpl/lower/wmma.py): the decomposed program verifies, holds no WMMA, and on the emulator
gives the original program's results bit for bit (the emulator's WMMA rule: float64 products and sums in the order
c, k = 0..K-1, one rounding to the result dtype), for every shape (N, M, K) in {1, 2, 4}^3 and every float input /
result dtype pair the verifier accepts, on edge inputs (zeros of both signs, subnormals, inf, NaN, values whose sums
overflow the result dtype) and random ones. After lower_narrow (the renderers' order: lower_narrow's WMMA has float32
inputs and, for a narrow result, a float64 one that it encodes) and before it, the results are the same bits too."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.machine import emulate
from refimpl.ir import INDEX_DTYPE, Ops, ProgramBuilder, elementwise, verify
from refimpl.lower import decompose_wmma, lower_narrow

FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
SHAPES = list(itertools.product((1, 2, 4), repeat=3))
THREADS = 48
UNSIGNED = {2: np.uint16, 4: np.uint32, 8: np.uint64}
ids = str


def wmma_kernel(tin, tout, N, M, K):
  """Per thread g: out[g] = WMMA(a[g], b[g], c[g]) with (N, M, K), operands loaded from their own buffers."""
  b = ProgramBuilder("wmma")
  out, xa, xb, xc = (b.global_buf(dt, THREADS * n) for dt, n in ((tout, M * N), (tin, M * K), (tin, K * N), (tout, M * N)))
  g = b.gidx(0, THREADS)
  def at(n): return b.alu(Ops.MUL, g, b.const(n, INDEX_DTYPE))
  a, bb = b.load(xa, at(M * K), count=M * K), b.load(xb, at(K * N), count=K * N)
  b.store(out, at(M * N), b.wmma(a, bb, b.load(xc, at(M * N), count=M * N), (N, M, K)))
  return b.build()


def edge_values(dt):
  """Zeros of both signs, the smallest and largest subnormals, the smallest normal, 1, the largest finite, inf, NaN."""
  ebits, mant = dtypes.finfo(dt)
  tiny, maxv = 2.0 ** (2 - 2 ** (ebits - 1)), (2 - 2.0 ** -mant) * 2.0 ** (2 ** (ebits - 1) - 1)
  sub = tiny * 2.0 ** -mant
  vals = [0.0, sub, tiny - sub, tiny, 1.0, maxv, np.inf, np.nan]
  with np.errstate(over="ignore"):
    return np.array(vals + [-v for v in vals], np.float64).astype(to_np(dt))


def inputs(dt, n, rng):
  """n values of dt: the first threads' operands are mostly edge values, the rest random (magnitudes 2^-8 .. 2^8)."""
  edges = edge_values(dt)
  rand = (rng.standard_normal(n) * 2.0 ** rng.integers(-8, 9, n)).astype(to_np(dt))
  pick = rng.integers(0, edges.size, n)
  use_edge = np.arange(n) < n // 2
  use_edge &= rng.random(n) < 0.5
  return np.where(use_edge, edges[pick], rand)


def bits(x): return x.view(UNSIGNED[x.dtype.itemsize])


@pytest.mark.parametrize("tout", FLOATS, ids=ids)
@pytest.mark.parametrize("tin", FLOATS, ids=ids)
def test_decomposition_gives_the_wmma_rule_bit_for_bit(tin, tout):
  """WMMA rule: for every (N, M, K) in {1, 2, 4}^3, the decomposed kernel verifies and its output has the original's
  bits on the emulator (edge and random inputs); with narrow dtypes, so do decompose_wmma(lower_narrow(p)) (what the
  renderers run) and lower_narrow(decompose_wmma(p))."""
  rng = np.random.default_rng(7)
  for N, M, K in SHAPES:
    p = wmma_kernel(tin, tout, N, M, K)
    lowered = verify(decompose_wmma(p))
    assert not any(u.op is Ops.WMMA for u in lowered.uops)
    arrays = [np.zeros(THREADS * M * N, to_np(tout)), inputs(tin, THREADS * M * K, rng), inputs(tin, THREADS * K * N, rng),
              inputs(tout, THREADS * M * N, rng)]
    with np.errstate(all="ignore"):
      want = emulate(p, arrays).buffers[0]
      got = emulate(lowered, arrays).buffers[0]
      np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{tin}->{tout} (N, M, K)=({N}, {M}, {K})")
      if {tin, tout} & {dtypes.float16, dtypes.bfloat16}:
        for order, q in (("renderers'", decompose_wmma(lower_narrow(p))), ("reversed", lower_narrow(lowered))):
          assert not any(u.op is Ops.WMMA for u in verify(q).uops)
          got = emulate(q, arrays).buffers[0]
          np.testing.assert_array_equal(bits(got), bits(want), err_msg=f"{order} order {tin}->{tout} ({N}, {M}, {K})")


def test_a_one_element_result_is_a_scalar():
  """(N, M, K) = (1, 1, K): the result is the CAST of the float64 sum itself (no VECTORIZE); a float64 one is the sum."""
  p = decompose_wmma(wmma_kernel(dtypes.float16, dtypes.float32, 1, 1, 4))
  value = p.uops[next(u for u in p.uops if u.op is Ops.STORE).src[1]]
  assert value.op is Ops.CAST and value.dtype == dtypes.float32
  p = decompose_wmma(wmma_kernel(dtypes.float32, dtypes.float64, 1, 1, 2))
  assert p.uops[next(u for u in p.uops if u.op is Ops.STORE).src[1]].op is Ops.ADD


def test_a_program_without_wmma_comes_back_unchanged():
  """The pass touches only WMMA: any other program is returned as it is."""
  p = elementwise(Ops.ADD, dtypes.float32)
  assert decompose_wmma(p) is p
