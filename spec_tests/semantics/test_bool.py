"""The ops on bool: ADD=OR, MUL=AND, MAX=OR, CMPNE=XOR, CMPLT=(!a && b), XOR/OR/AND logical, MULACC = (a AND b) OR c;
IDIV MOD SUB NEG SHL SHR are rejected.

Rules: the bool parts of alu.arith, alu.bitwise, alu.maximum, alu.compare and alu.mulacc (refimpl/emulator/alu.py;
their homes: test_int_wrap.py, test_bitwise.py, test_max.py, test_compare.py, test_mulacc.py). Decision row: "bool"
(SPEC.md "Decisions"). CASTs to and from bool: test_cast_bool.py. Backend tests: refimpl/conformance/rules/test_bool.py.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.alu import exec_alu
from refimpl.ir.ops import Ops

RULES = ()
DECISIONS = {"bool": "test_decision_bool_ops"}
ALSO = (alu.arith, alu.bitwise, alu.maximum, alu.compare, alu.mulacc)

@pytest.mark.parametrize("op", [Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND])
def test_bool_truth_tables(op):
  """Rule (bool): ADD=OR, MUL=AND, MAX=OR, CMPNE=XOR, CMPLT=(!a && b), XOR/OR/AND logical."""
  table = {Ops.ADD: lambda a, b: a or b, Ops.MUL: lambda a, b: a and b, Ops.MAX: lambda a, b: a or b,
           Ops.CMPLT: lambda a, b: (not a) and b, Ops.CMPNE: lambda a, b: a != b, Ops.XOR: lambda a, b: a != b,
           Ops.OR: lambda a, b: a or b, Ops.AND: lambda a, b: a and b}[op]
  a, b = np.array([False, False, True, True]), np.array([False, True, False, True])
  out = exec_alu(op, dtypes.bool, a, b)
  assert out.values.dtype == np.bool_ and out.values.tolist() == [table(x, y) for x, y in zip(a.tolist(), b.tolist())]

def test_bool_mulacc_is_and_then_or():
  trip = list(itertools.product([False, True], repeat=3))
  a, b, c = (np.array(col) for col in zip(*trip))
  assert exec_alu(Ops.MULACC, dtypes.bool, a, b, c).values.tolist() == [(x and y) or z for x, y, z in trip]

def test_decision_bool_ops():
  """bool: ADD=OR, MUL=AND, MAX=OR, CMPNE=XOR, CMPLT=(!a&&b); IDIV MOD SUB NEG SHL SHR are rejected."""
  a, b = np.array([False, False, True, True]), np.array([False, True, False, True])
  want = {Ops.ADD: [0, 1, 1, 1], Ops.MUL: [0, 0, 0, 1], Ops.MAX: [0, 1, 1, 1], Ops.CMPNE: [0, 1, 1, 0], Ops.CMPLT: [0, 1, 0, 0]}
  for op, w in want.items(): assert exec_alu(op, dtypes.bool, a, b).values.tolist() == [bool(v) for v in w], op
  for op in (Ops.IDIV, Ops.MOD, Ops.SUB, Ops.SHL, Ops.SHR):
    with pytest.raises(ValueError, match="bool"): exec_alu(op, dtypes.bool, a, b)
  with pytest.raises(ValueError, match="bool"): exec_alu(Ops.NEG, dtypes.bool, a)
