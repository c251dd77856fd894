"""BITCAST (same itemsize, no bool): the same bits read as the other dtype; exact, never loose or undefined by itself.

Rule: alu.bitcast (refimpl/emulator/alu.py; SPEC.md "Rules", `bitcast`: BITCAST). Decision row: "BITCAST" (SPEC.md
"Decisions"). That a BITCAST of a computed NaN is loose is the "looseness" row (test_looseness.py). Backend tests:
refimpl/conformance/rules/test_bitcast.py.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_bitcast
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.testing.oracle import UINT

from .arrays import F32, I32
from .casts import ALL

RULES = (alu.bitcast,)
DECISIONS = {"BITCAST": "test_decision_bitcast_preserves_bits"}

SAME_SIZE = [(s, d) for s, d in itertools.product(ALL, ALL) if s.itemsize == d.itemsize and dtypes.bool not in (s, d)]

@pytest.mark.parametrize("src,dst", SAME_SIZE, ids=[f"{dtype_to_str(s)}-{dtype_to_str(d)}" for s, d in SAME_SIZE])
def test_bitcast_preserves_bits(src, dst):
  """Rule: BITCAST keeps every bit (NaN payloads and -0 included) and is never loose or undefined."""
  bits = 8 * src.itemsize
  pattern = np.random.default_rng(bits).integers(0, 2**bits, size=500, dtype=np.uint64).astype(UINT[bits])
  pattern = np.concatenate([pattern, np.array([0, 1, 2 ** (bits - 1), 2**bits - 1], dtype=UINT[bits])])
  out = exec_bitcast(pattern.view(to_np(src)), src, dst)
  assert out.values.dtype == to_np(dst) and out.values.view(UINT[bits]).tolist() == pattern.tolist()
  assert out.loose is None and out.undefined is None

def test_bitcast_rejects_bool_and_size_changes():
  with pytest.raises(ValueError, match="one size"): exec_bitcast(np.float32(1), dtypes.float32, dtypes.int16)
  with pytest.raises(ValueError, match="bool"): exec_bitcast(np.array([1], np.uint8), dtypes.uint8, dtypes.bool)

def test_decision_bitcast_preserves_bits():
  """BITCAST: same size only; bits preserved exactly (a NaN's payload and -0 too)."""
  pattern = np.array([0x7FC00001, 0x80000000, 0x3F800000], dtype=np.uint32)
  out = exec_bitcast(pattern.view(np.float32), F32, dtypes.uint32)
  assert out.values.tolist() == pattern.tolist() and out.loose is None
  assert exec_bitcast(np.float32(1), F32, I32).values.item() == 0x3F800000
