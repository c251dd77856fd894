"""THREEFRY (uint64 only): Threefry-2x32 with 20 rounds (Random123's threefry2x32_20) as tinygrad 0.10.1 defines it;
the counter and key are uint64 with the low word first, the result is out1:out0. Exact.

Rule: alu.threefry (refimpl/emulator/alu.py; SPEC.md "Rules", `threefry`: THREEFRY). Decision row: "THREEFRY" (SPEC.md
"Decisions"). Oracles: an independent scalar Threefry-2x32-20 and Random123's known-answer vectors. Backend tests:
refimpl/conformance/rules/test_threefry.py; the lowering to uint32 ops: spec_tests/test_lower_threefry.py.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops

RULES = (alu.threefry,)
DECISIONS = {"THREEFRY": "test_decision_threefry"}

def threefry2x32_20(ctr: tuple[int, int], key: tuple[int, int]) -> tuple[int, int]:
  """Scalar Threefry-2x32-20 as Random123 (threefry.h) defines it: ks[2] = 0x1BD11BDA ^ k0 ^ k1; X += ks at the start;
  after every 4 rounds X0 += ks[(s) % 3], X1 += ks[(s+1) % 3] + s, s = 1..5."""
  m = 0xFFFFFFFF
  ks = [key[0], key[1], 0x1BD11BDA ^ key[0] ^ key[1]]
  x = [(ctr[0] + ks[0]) & m, (ctr[1] + ks[1]) & m]
  rot = [13, 15, 26, 6, 17, 29, 16, 24]
  for rnd in range(20):
    x[0] = (x[0] + x[1]) & m
    r = rot[rnd % 8]
    x[1] = (((x[1] << r) | (x[1] >> (32 - r))) & m) ^ x[0]
    if rnd % 4 == 3:
      s = rnd // 4 + 1
      x[0] = (x[0] + ks[s % 3]) & m
      x[1] = (x[1] + ks[(s + 1) % 3] + s) & m
  return x[0], x[1]

def pack(lo: int, hi: int) -> int: return (hi << 32) | lo

# Random123 kat_vectors, threefry2x32 20 rounds: (ctr0, ctr1), (key0, key1) -> (out0, out1); also in JAX's
# tests/random_test.py (testThreefry2x32), which cites Random123's test_threefry.cpp.
KAT = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
       ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
       ((0x243F6A88, 0x85A308D3), (0x13198A2E, 0x03707344), (0xC4923A9C, 0x483DF7A0))]

@pytest.mark.parametrize("ctr,key,want", KAT)
def test_threefry_random123_known_answers(ctr, key, want):
  """Rule: THREEFRY(x, key) is threefry2x32_20 with x = ctr1:ctr0 and key = key1:key0; result out1:out0."""
  assert threefry2x32_20(ctr, key) == want  # the independent scalar version agrees with the published vectors
  out = exec_alu(Ops.THREEFRY, dtypes.uint64, np.uint64(pack(*ctr)), np.uint64(pack(*key)))
  assert out.values.item() == pack(*want) and out.loose is None and out.undefined is None

@given(st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1)), min_size=1, max_size=16))
def test_threefry_matches_scalar_reference(pairs):
  xs, ks = (np.array(c, dtype=np.uint64) for c in zip(*pairs))
  got = exec_alu(Ops.THREEFRY, dtypes.uint64, xs, ks).values.tolist()
  split = lambda v: (v & 0xFFFFFFFF, v >> 32)
  assert got == [pack(*threefry2x32_20(split(x), split(k))) for x, k in pairs]

def test_decision_threefry():
  """THREEFRY: threefry2x32, 20 rounds, on uint64; Random123's first known answer (zero counter, zero key) is
  (0x6b200159, 0x99ba4efe), packed low word first."""
  assert exec_alu(Ops.THREEFRY, dtypes.uint64, np.uint64(0), np.uint64(0)).values.item() == 0x99BA4EFE6B200159
