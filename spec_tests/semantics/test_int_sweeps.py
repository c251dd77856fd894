"""Every int binary op against Python ints with an explicit two's complement wrap, on every width: the sweeps the int
families share (one test covers all of ADD SUB MUL IDIV MOD SHL SHR XOR OR AND MAX CMPLT CMPNE).

Not a rule's home: each op's rule has its own file, named in ALSO's order: alu.arith (test_int_wrap.py), alu.idiv_mod
(test_idiv_mod.py), alu.shift (test_shifts.py), alu.bitwise (test_bitwise.py), alu.maximum (test_max.py), alu.compare
(test_compare.py), each with its exhaustive 8-bit test. Oracle: ints.py.
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import to_np
from refimpl.emulator import alu

from .ints import BINARY, IDS, INTS, check, int_edges, int_values

RULES = ()
DECISIONS: dict[str, str] = {}
ALSO = (alu.arith, alu.idiv_mod, alu.shift, alu.bitwise, alu.maximum, alu.compare)

@pytest.mark.parametrize("dt", INTS, ids=IDS)
@given(data=st.data())
def test_int_binary_ops_against_python_ints_hypothesis(dt, data):
  """Every int rule on every width (edge-biased: MIN, MAX, powers of two and neighbours, shift widths)."""
  op = data.draw(st.sampled_from(BINARY))
  pairs = data.draw(st.lists(st.tuples(int_values(dt), int_values(dt)), min_size=1, max_size=16))
  a, b = (np.array(c, dtype=to_np(dt)) for c in zip(*pairs))
  assert check(op, dt, a, b) == []

@pytest.mark.parametrize("dt", INTS, ids=IDS)
def test_int_edge_grid_against_python_ints(dt):
  """Every pair of edge values, every binary op (covers MIN / -1, MIN % -1, 1 << (bits-1), x >> (bits-1))."""
  e = int_edges(dt)
  a, b = (np.array(c, dtype=to_np(dt)) for c in zip(*itertools.product(e, e)))
  for op in BINARY: assert check(op, dt, a, b) == [], op
