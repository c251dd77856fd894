"""The reducer's edits of a case's values (reduce.py's passes 3, 6, 7 and 8 propose them, one candidate each, on a
copy of the case's `State`, in place): int ALU uops and int / bool CASTs of CONSTs folded to CONSTs by alu's rules
(`folded`), a scalar LOAD of an input nothing stores to at a constant index replaced by the CONST it loads
(`loaded_constant`), a CONST set toward 0, an input's elements zeroed, a var set to its minimum. The edits of the
program's structure are edits.py's; an edit that does not apply raises ValueError.
"""
from __future__ import annotations

import numpy as np

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.alu import exec_alu, exec_cast
from refimpl.fuzz.editable import State
from refimpl.fuzz.edits import replace_uses
from refimpl.fuzz.graph import Graph, Node
from refimpl.ir import Ops


def stored_buffers(g: Graph) -> set[int]:
  """The ids of the buffers some STORE writes."""
  return {id(n.src[0].src[0]) for n in g.nodes if n.op is Ops.STORE and n.src[0].op is Ops.INDEX}

def loaded_constant(s: State, n: Node, stored: set[int]):
  """The value a scalar, ungated LOAD at a CONST index of an input buffer nothing stores to reads, else None."""
  if n.op is not Ops.LOAD or n.dtype.count != 1 or len(n.src) != 1 or n.src[0].op is not Ops.INDEX: return None
  ix = n.src[0]
  buf, i = ix.src[0], ix.src[1] if len(ix.src) == 2 else None
  if buf.op is not Ops.DEFINE_GLOBAL or id(buf) in stored or i is None or i.op is not Ops.CONST: return None
  arr = s.arrays.get(id(buf))
  if arr is None or not 0 <= int(i.arg) < arr.size: return None
  x = arr[int(i.arg)]
  return bool(x) if n.dtype == dtypes.bool else int(x) if dtypes.is_int(n.dtype) else float(x)

FOLDED_OPS = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.SHL, Ops.SHR, Ops.AND, Ops.OR, Ops.XOR, Ops.MAX, Ops.IDIV, Ops.MOD)

def folded(n: Node):
  """The value of an int ALU uop (FOLDED_OPS) of scalar CONSTs or of a CAST between ints and bool of a scalar CONST, by
  alu's rule; None when it is not one or the rule leaves it undefined (a zero divisor, a shift count out of range,
  INT_MIN / -1). A wrong fold would only make a candidate that does not fail: every candidate runs."""
  if n.op is Ops.CAST: return _folded_cast(n)
  if n.op not in FOLDED_OPS or n.dtype.count != 1 or not dtypes.is_int(n.dtype) or len(n.src) != 2: return None
  if any(x.op is not Ops.CONST or x.dtype != n.dtype for x in n.src): return None
  out = exec_alu(n.op, n.dtype, *(np.array([int(x.arg)], to_np(n.dtype)) for x in n.src))
  return None if out.undefined is not None else int(out.values[0])

def _folded_cast(n: Node):
  """folded() of a CAST: int or bool to int or bool, of a scalar CONST."""
  src = n.src[0]
  if n.dtype.count != 1 or src.op is not Ops.CONST or src.dtype.count != 1: return None
  if not all(dt is dtypes.bool or dtypes.is_int(dt) for dt in (src.dtype, n.dtype)): return None
  v = exec_cast(np.array([src.arg], to_np(src.dtype)), src.dtype, n.dtype).values[0]
  return bool(v) if n.dtype is dtypes.bool else int(v)

def fold_int_constants(s: State) -> None:
  """reduce.py's pass 3 on s, in place: every uop `folded` gives a value becomes a CONST of it, until none is left."""
  while True:
    n = next((x for x in s.graph.nodes if folded(x) is not None), None)
    if n is None: return
    c = Node(Ops.CONST, n.dtype, (), folded(n))
    s.graph.insert_before(n, [c])
    replace_uses(s.graph, n, c)

def load_to_constant(s: State, load: Node) -> None:
  """reduce.py's pass 6 on s, in place: the LOAD becomes a CONST of the value it loads (`loaded_constant`)."""
  c = Node(Ops.CONST, load.dtype, (), loaded_constant(s, load, stored_buffers(s.graph)))
  s.graph.nodes.insert(0, c)
  replace_uses(s.graph, load, c)

def set_constant(const: Node, value: int) -> None:
  """reduce.py's pass 7, in place: the CONST holds `value` (a float on a float dtype)."""
  const.arg = float(value) if dtypes.is_float(const.dtype) else value

def zero_input(s: State, k: int, lo: int, hi: int) -> None:
  """reduce.py's pass 8 on s, in place: elements [lo, hi) of the k-th input become zeros (a new array); ValueError
  when they are zeros already."""
  buf = s.graph.globals()[k]
  a = s.arrays[id(buf)].copy()
  if not a.view(np.uint8).reshape(a.size, -1)[lo:hi].any(): raise ValueError("already zero")
  a.view(np.uint8).reshape(a.size, -1)[lo:hi] = 0
  s.arrays[id(buf)] = a

def var_to_minimum(s: State, k: int) -> None:
  """reduce.py's pass 8 on s, in place: the k-th DEFINE_VAR takes its minimum."""
  var = [n for n in s.graph.nodes if n.op is Ops.DEFINE_VAR][k]
  s.vars[id(var)] = var.arg[1]
