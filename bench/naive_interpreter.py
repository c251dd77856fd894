"""A straightforward per-element interpreter of kernel programs: the yardstick for the emulator's speed, not a reference.

It runs the threads of the launch one after another and, in each thread, the uops one at a time on numpy scalars
(so float32 arithmetic rounds as float32), with a Python dict of registers. This is the shape of a "simple"
emulator (tinygrad's ops_python works per lane in Python the same way). No undefined-behaviour checks, no looseness.

Covers what elementwise and reduction kernels use: DEFINE_GLOBAL, DEFINE_VAR, SPECIAL, CONST, INDEX, LOAD / STORE
(gated, scalar), RANGE / ENDRANGE, IF / ENDIF, DEFINE_ACC / ASSIGN, CAST, and the ALU ops below.
"""
from __future__ import annotations

from collections.abc import Sequence
from itertools import product

import numpy as np

from refimpl.dtype import to_np
from refimpl.ir import Ops, Program

ALU = {
  Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b, Ops.NEG: lambda a: -a,
  Ops.MAX: lambda a, b: max(a, b), Ops.CMPLT: lambda a, b: a < b, Ops.CMPNE: lambda a, b: a != b,
  Ops.FDIV: lambda a, b: a / b, Ops.AND: lambda a, b: a & b, Ops.OR: lambda a, b: a | b, Ops.XOR: lambda a, b: a ^ b,
  Ops.WHERE: lambda c, a, b: a if c else b, Ops.MULACC: lambda a, b, c: a * b + c, Ops.SQRT: np.sqrt, Ops.EXP2: np.exp2,
  Ops.RECIP: lambda a: 1 / a,
}


def interpret(program: Program, buffers: Sequence[np.ndarray], vals: Sequence[int] = ()) -> list[np.ndarray]:
  """Runs `program` thread by thread on copies of `buffers`; returns them after the run."""
  uops = program.uops
  bufs = [np.array(b, copy=True).reshape(-1) for b in buffers]
  ends, stack = {}, []
  for i, u in enumerate(uops):
    if u.op in (Ops.RANGE, Ops.IF): stack.append(i)
    elif u.op in (Ops.ENDRANGE, Ops.ENDIF): ends[stack.pop()] = i
  gs, ls = program.global_size, program.local_size
  var_vals = dict(zip((i for i, u in enumerate(uops) if u.op is Ops.DEFINE_VAR), vals))
  with np.errstate(all="ignore"):
    for g2, g1, g0, l2, l1, l0 in product(range(gs[2]), range(gs[1]), range(gs[0]), range(ls[2]), range(ls[1]), range(ls[0])):
      ids = {"gidx0": g0, "gidx1": g1, "gidx2": g2, "lidx0": l0, "lidx1": l1, "lidx2": l2}
      reg: dict[int, object] = {}
      pc = 0
      while pc < len(uops):
        u = uops[pc]
        op, src = u.op, u.src
        if op is Ops.DEFINE_GLOBAL: reg[pc] = bufs[u.arg]
        elif op is Ops.DEFINE_VAR: reg[pc] = np.int32(var_vals[pc])
        elif op is Ops.SPECIAL: reg[pc] = np.int32(ids[u.arg[0]])
        elif op is Ops.CONST: reg[pc] = to_np(u.dtype).type(u.arg)
        elif op is Ops.INDEX: reg[pc] = (reg[src[0]], int(reg[src[1]]))
        elif op is Ops.LOAD:
          buf, idx = reg[src[0]]
          reg[pc] = buf[idx] if len(src) == 1 or reg[src[2]] else reg[src[1]]
        elif op is Ops.STORE:
          if len(src) == 2 or reg[src[2]]:
            buf, idx = reg[src[0]]
            buf[idx] = reg[src[1]]
        elif op is Ops.DEFINE_ACC: reg[pc] = reg[src[0]]
        elif op is Ops.ASSIGN: reg[pc] = reg[src[0]] = reg[src[1]]
        elif op is Ops.RANGE:
          if pc not in reg: reg[pc] = reg[src[0]]
          if reg[pc] >= reg[src[1]]:
            del reg[pc]
            pc = ends[pc]
        elif op is Ops.ENDRANGE:
          reg[src[0]] = np.int32(reg[src[0]] + 1)
          pc = src[0]
          continue
        elif op is Ops.IF:
          if not reg[src[0]]: pc = ends[pc]
        elif op is Ops.ENDIF: pass
        elif op is Ops.CAST: reg[pc] = to_np(u.dtype).type(reg[src[0]])
        else: reg[pc] = ALU[op](*(reg[s] for s in src))
        pc += 1
  return bufs
