"""WHERE (c ? a : b): selects the bits of a where the bool c is true, else of b; exact for every dtype, NaN payloads
included.

Rule: alu.where (refimpl/emulator/alu.py; SPEC.md "Rules", `where`: WHERE). No decision row of its own: that WHERE moves
bits is part of the "looseness" row (test_looseness.py). Backend tests: refimpl/conformance/rules/test_bool.py (bool) and
the op sweeps of refimpl/conformance/rules/test_every_op.py.
"""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops

from .arrays import F32, f32

RULES = (alu.where,)
DECISIONS: dict[str, str] = {}

def test_where_selects_bits():
  """WHERE: c ? a : b, bit for bit (NaN payloads included), never loose."""
  nan = np.array([0x7FC12345], np.uint32).view(np.float32)
  out = exec_alu(Ops.WHERE, F32, np.array([True, False]), np.concatenate([nan, nan]), f32(1, 2))
  assert out.values.view(np.uint32).tolist() == [0x7FC12345, 0x40000000] and out.loose is None
  with pytest.raises(TypeError): exec_alu(Ops.WHERE, F32, f32(1), f32(1), f32(2))
