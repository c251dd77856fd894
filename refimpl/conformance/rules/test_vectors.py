"""Vectors and WMMA: vector loads, ALU ops, GEP shuffles, VECTORIZE, gated vector stores, MULACC of half vectors,
and WMMA accumulating as the emulator does (SPEC.md "Execution").

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import numpy as np

from refimpl.conformance.rules.common import f16, f32, i32, rounded_once
from refimpl.emulator.alu import allowed_results
from refimpl.emulator.machine import emulate
from refimpl.ir import INDEX_DTYPE, Ops, ProgramBuilder
from refimpl.testing.oracle import sqrt
from refimpl.testing.programs import assert_same, require, run, run_against_emulator, same_bits


def test_vectors_load_compute_shuffle_and_store(backend):
  """float4 loads, a vector MUL, GEP shuffles, VECTORIZE, gated vector stores, and MULACC of half vectors (its allowed set:
  fused or unfused, lane by lane)."""
  require(backend, f16)
  b = ProgramBuilder("vec4")
  out, hout, x = b.global_buf(f32, 32), b.global_buf(f16, 32), b.global_buf(f32, 32)
  g = b.gidx(0, 8)
  base = b.alu(Ops.MUL, g, b.const(4, i32))
  v = b.load(x, base, count=4)
  w = b.alu(Ops.MUL, v, b.const((1.0, 2.0, 3.0, 4.0), f32.vec(4)))
  rev = b.gep(w, 3, 2, 1, 0)
  pair = b.vectorize(b.gep(rev, 0), b.gep(v, 0))
  b.store(out, base, rev)
  b.store(out, b.alu(Ops.ADD, base, b.const(0, i32)), b.gep(pair, 0, 1), gate=b.alu(Ops.CMPLT, g, b.const(2, i32)))
  hv = b.cast(v, f16.vec(4))
  b.store(hout, base, b.alu(Ops.MULACC, hv, hv, b.alu(Ops.SQRT, hv)))
  xs = np.arange(32, dtype=np.float32) + 0.5
  got, _ = run_against_emulator(backend, b.build(), [np.zeros(32, np.float32), np.zeros(32, np.float16), xs])
  quad = (xs.reshape(8, 4) * [1, 2, 3, 4])[:, ::-1].copy()
  quad[:2, 1] = xs.reshape(8, 4)[:2, 0]
  assert got[0].tolist() == quad.ravel().tolist()
  h = xs.astype(np.float16)
  ok = np.zeros(32, bool)
  for want in allowed_results(Ops.MULACC, f16, h, h, rounded_once(f16, sqrt, h)): ok |= same_bits(got[1], want)
  assert ok.all(), f"MULACC of half vectors: {got[1][~ok]}"

def test_wmma_accumulates_like_the_emulator(backend):
  require(backend, f16)
  N, M, K = 2, 3, 4
  b = ProgramBuilder("wmma")
  out, abuf, bbuf, cbuf = b.global_buf(f32, M * N), b.global_buf(f16, M * K), b.global_buf(f16, K * N), b.global_buf(f32, M * N)
  zero = b.const(0, INDEX_DTYPE)
  d = b.wmma(b.load(abuf, zero, count=M * K), b.load(bbuf, zero, count=K * N), b.load(cbuf, zero, count=M * N), (N, M, K))
  b.store(out, zero, d)
  p = b.build()
  rng = np.random.default_rng(4)
  av, bv, cv = (rng.standard_normal(s).astype(t) for s, t in ((M * K, np.float16), (K * N, np.float16), (M * N, np.float32)))
  got = run(backend, p, np.zeros(M * N, np.float32), av, bv, cv)[0]
  assert_same(got, emulate(p, [np.zeros(M * N, np.float32), av, bv, cv]).buffers[0], "WMMA")
  want = cv.reshape(M, N).astype(np.float64) + av.reshape(M, K).astype(np.float64) @ bv.reshape(K, N).astype(np.float64)
  np.testing.assert_allclose(got, want.ravel().astype(np.float32), rtol=1e-6)
