"""XOR, OR, AND (ints and bool): bit by bit on the two's complement pattern; on bool the logical operation.

Rule: alu.bitwise (refimpl/emulator/alu.py; SPEC.md "Rules", `bitwise`: XOR OR AND). No decision row of its own: on bool
the ops are in the "bool" row (test_bool.py), and test_int_sweeps.py sweeps them with every other int op. Backend tests:
refimpl/conformance/rules/test_bool.py (bool) and the op sweeps of refimpl/conformance/rules/test_every_op.py. Oracle:
Python ints (ints.py).
"""
from __future__ import annotations

import pytest

from refimpl.emulator import alu
from refimpl.ir.ops import Ops

from .ints import INT8_IDS, INT8S, every_8bit_pair

RULES = (alu.bitwise,)
DECISIONS: dict[str, str] = {}

@pytest.mark.parametrize("dt", INT8S, ids=INT8_IDS)
@pytest.mark.parametrize("op", [Ops.XOR, Ops.OR, Ops.AND])
def test_every_8bit_pair_against_python_ints(op, dt):
  """Rule: XOR OR AND bit by bit on the two's complement pattern. All 65536 pairs."""
  assert every_8bit_pair(op, dt) == []
