"""The ops on bool (ADD=OR, MUL=AND, MAX=OR, CMPNE=XOR, CMPLT=(!a && b), logical XOR OR AND, MULACC, WHERE).
SPEC.md "Decisions", row "bool"; its emulator tests: spec_tests/semantics/test_bool.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import numpy as np

from refimpl.conformance.rules.common import bl
from refimpl.ir import Ops
from refimpl.testing.programs import a, ew


def test_bool_ops_follow_the_spec_table(backend):
  x, y = a([0, 0, 1, 1], bl), a([0, 1, 0, 1], bl)
  table = {Ops.ADD: lambda p, q: p or q, Ops.MUL: lambda p, q: p and q, Ops.MAX: lambda p, q: p or q,
           Ops.CMPLT: lambda p, q: (not p) and q, Ops.CMPNE: lambda p, q: p != q, Ops.XOR: lambda p, q: p != q,
           Ops.OR: lambda p, q: p or q, Ops.AND: lambda p, q: p and q}
  for op, f in table.items(): assert ew(backend, op, bl, x, y).tolist() == [f(p, q) for p, q in zip(x, y)], op
  c = a([0, 0, 0, 0, 1, 1, 1, 1], bl)
  x2, y2 = np.tile(x, 2), np.tile(y, 2)
  assert ew(backend, Ops.MULACC, bl, x2, y2, c).tolist() == [bool((p and q) or r) for p, q, r in zip(x2, y2, c)]
  assert ew(backend, Ops.WHERE, bl, c, x2, y2).tolist() == [bool(p if r else q) for p, q, r in zip(x2, y2, c)]
