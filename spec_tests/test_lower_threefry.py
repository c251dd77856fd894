"""The THREEFRY decomposition (refimpl/lower/threefry.py): the decomposed program verifies, holds no THREEFRY, is defined
for every input (the emulator runs it strictly), and gives THREEFRY's rule bit for bit (refimpl.emulator.alu.threefry,
which spec_tests/semantics/test_threefry.py checks against Random123's known answers)."""
from __future__ import annotations

import numpy as np

from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder, elementwise
from refimpl.lower import decompose_threefry

U64 = dtypes.uint64
EDGES = [0, 1, 0xFFFFFFFF, 1 << 32, (1 << 64) - 1, (1 << 63), 0x243F6A8885A308D3, 0x13198A2E03707344]


def _inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
  """Every pair of edge words, then random uint64s."""
  rng = np.random.default_rng(5)
  xs = [x for x in EDGES for _ in EDGES] + [int(v) for v in rng.integers(0, 2**63, n, dtype=np.uint64) * 2 + 1]
  keys = [k for _ in EDGES for k in EDGES] + [int(v) for v in rng.integers(0, 2**63, n, dtype=np.uint64)]
  return np.array(xs, np.uint64), np.array(keys, np.uint64)


def test_decomposition_gives_the_threefry_rule_bit_for_bit():
  """THREEFRY rule: threefry2x32, 20 rounds; the decomposed kernel's output equals the rule's on edge and random inputs,
  and it runs in strict mode (no uop it emits is undefined for these inputs)."""
  x, key = _inputs(4032)
  p = elementwise(Ops.THREEFRY, U64, n=len(x))
  lowered = decompose_threefry(p)
  assert not any(u.op is Ops.THREEFRY for u in lowered.uops)
  want = emulate(p, [np.zeros_like(x), x, key]).buffers[0]
  got = emulate(lowered, [np.zeros_like(x), x, key]).buffers[0]
  np.testing.assert_array_equal(got, want)


def test_decomposition_of_a_vector_threefry_works_lane_by_lane():
  """THREEFRY on uint64.vec(2) is the rule on each lane: the lowering's constants are VECTORIZEd to the width."""
  b = ProgramBuilder("tf_vec")
  out, xs, ks = b.global_buf(U64, 8), b.global_buf(U64, 8), b.global_buf(U64, 8)
  i = b.alu(Ops.MUL, b.gidx(0, 4), b.const(2, dtypes.int32))
  v = b.alu(Ops.THREEFRY, b.load(xs, i, count=2), b.load(ks, i, count=2))
  b.store(out, i, v)
  p = b.build()
  x, key = _inputs(0)
  x, key = x[:8].copy(), key[9:17].copy()
  want = emulate(p, [np.zeros(8, np.uint64), x, key]).buffers[0]
  got = emulate(decompose_threefry(p), [np.zeros(8, np.uint64), x, key]).buffers[0]
  np.testing.assert_array_equal(got, want)


def test_a_program_without_threefry_comes_back_unchanged():
  """The pass touches only THREEFRY: any other program is returned as it is."""
  p = elementwise(Ops.ADD, U64)
  assert decompose_threefry(p) is p
