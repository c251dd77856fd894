"""A fuzz case (program + inputs + vars), what the spec expects of it, and how a finding is named.

  prepare(case)   emulator (permissive) -> Prepared: the expectation, or why the case is not run natively (`discard`),
                  or the emulator's own exception (`error`, a finding against the emulator)
  culprit(case, mismatch)   the op that produced the first wrong element (for the finding's signature)

Which cases run natively (the rest are discarded, never compared):
  - no undefined behaviour at all: run, compare everything;
  - undefined values of a deferred ALU kind (every one: a shift count, a float->int cast, an integer division by zero
    or INT_MIN / -1: refimpl/emulator/ub.py) that a WHERE discards: no event at all, run, compare everything
    (refimpl's renderers guard those ops, refimpl.lower.guard_poison and guard_division, so the native code is defined
    there too and no division traps);
  - such values stored to memory (events whose `use` is "stored"), which flow nowhere else: run; the emulator marks the
    elements they reach undefined and those are not compared;
  - any other undefined behaviour: an immediate kind (an undefined memory access or race), an undefined value used as
    an index, a gate, a condition or a loop bound, an undefined value read from memory (a racy or uninitialised load),
    or a stored undefined value that memory carries to control (see kinds.control_taint): discarded.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.machine import Emulation, emulate
from refimpl.errors import UndefinedBehavior
from refimpl.fuzz.expect import Expected, Mismatch, expect
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.fuzz.kinds import control_taint
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, Program


@dataclass
class Case:
  """Everything one run needs: the program, one array per buffer (DEFINE_GLOBAL order), one int per DEFINE_VAR."""
  program: Program
  inputs: list[np.ndarray]
  vals: tuple[int, ...] = ()

  def renamed(self, name: str) -> Case: return Case(dataclasses.replace(self.program, name=name), self.inputs, self.vals)


@dataclass
class Prepared:
  case: Case
  expected: Expected | None = None
  discard: str | None = None
  error: str | None = None
  error_op: str = ""   # the op the emulator failed on, when its traceback shows it


def failing_uop(tb) -> int | None:
  """The uop index the emulator was executing when it raised: the innermost frame of its run loop (Machine.run keeps
  the index in `i`). None when the traceback does not go through it."""
  found = None
  while tb is not None:
    code = tb.tb_frame.f_code
    if code.co_name == "run" and code.co_filename.endswith("machine.py") and isinstance(tb.tb_frame.f_locals.get("i"), int):
      found = tb.tb_frame.f_locals["i"]
    tb = tb.tb_next
  return found


def discard_reason(program: Program, events: list[UndefinedBehavior]) -> str | None:
  """Why a program with these (permissive-mode) events must not run natively, or None (see the module docstring)."""
  if not events: return None
  for e in events:
    if e.use is None or e.kind.family == "memory access": return f"undefined {e.kind.family} ({e.reason})"
    if e.use != "stored": return f"an undefined value used as {'an' if e.use[0] in 'aeiou' else 'a'} {e.use} ({e.origin.reason})"
  if control_taint(program, {e.origin.uop_index for e in events}): return "an undefined value reaches control flow or an index"
  return None


def prepare(case: Case, emulation: Emulation | None = None) -> Prepared:
  """The expectation of a case (see the module docstring). `emulation`: a permissive run already made of it."""
  p, running = case.program, case.program
  try:
    em = emulation if emulation is not None else emulate(p, case.inputs, case.vals, strict=False)
    if (why := discard_reason(p, em.events)) is not None: return Prepared(case, discard=why)
    def run_variant(vp: Program) -> Emulation:
      nonlocal running
      running = vp
      return emulate(vp, case.inputs, case.vals, strict=False)
    expected = expect(p, em, run_variant)
  except Exception as e:  # the emulator (the spec) failed on a verified program: a finding against refimpl itself
    return Prepared(case, error=f"{type(e).__name__}: {e}", error_op=emulator_error_op(e, p, running))
  return Prepared(case, expected)


def emulator_error_op(e: BaseException, program: Program, running: Program) -> str:
  """The op key of the uop the emulator failed on ("" when unknown; the variant run's extra uops are not named)."""
  i = failing_uop(e.__traceback__)
  if i is None: return ""
  if running is not program: return op_key(running, i) if i < len(running.uops) else ""
  return op_key(program, i)


# ***** naming a finding *****

def op_key(program: Program, i: int) -> str:
  """"IDIV int8", "CAST float32->int8", "LOAD float16": the op of uop i and the dtypes it works on."""
  u = program.uops[i]
  if u.op in (Ops.CAST, Ops.BITCAST):
    return f"{u.op.name} {_dt(program.uops[u.src[0]].dtype)}->{_dt(u.dtype)}"
  if u.op in GroupOp.ALU: return f"{u.op.name} {_dt(program.uops[u.src[-1]].dtype)}"
  if u.op is Ops.WMMA: return f"WMMA {_dt(program.uops[u.src[0]].dtype)}->{_dt(u.dtype)}"
  if u.op is Ops.STORE: return f"STORE {_dt(program.uops[u.src[1]].dtype)}"
  return f"{u.op.name} {_dt(u.dtype) if u.dtype != dtypes.void else '-'}"

def _dt(dt) -> str:
  """The scalar dtype's name (a vector op is filed with its scalar op: one bug, one signature)."""
  return dt.scalar().name.replace("unsigned ", "u")

def last_op(program: Program) -> str:
  """The last computing op of a program (ALU, CAST, BITCAST, WMMA), else its last LOAD or STORE: what a crash, hang or
  compiler failure of a reduced program is filed under."""
  for ops in (GroupOp.ALU | {Ops.CAST, Ops.BITCAST, Ops.WMMA}, {Ops.LOAD, Ops.STORE}):
    for i in range(len(program.uops) - 1, -1, -1):
      if program.uops[i].op in ops: return op_key(program, i)
  return "program -"


def culprit(case: Case, m: Mismatch) -> str:
  """The op whose value the wrong element holds: the emulator runs a copy of the program in which every STORE into that
  buffer also stores (its number * 16 + lane) into a shadow buffer, which names the last writer; GEP and VECTORIZE are
  looked through, and an ASSIGN stands for the value it assigns. "STORE <dtype>" when no store wrote the element (the
  backend wrote where it should not)."""
  p = case.program
  g = Graph.from_program(p)
  _, index, _ = g.linearize()
  target = g.globals()[m.buffer]
  size = target.dtype.size
  shadow = Node(Ops.DEFINE_GLOBAL, INDEX_DTYPE.ptr(size))
  stores = [n for n in g.nodes if n.op is Ops.STORE and n.src[0].src[0] is target]
  for k, s in enumerate(stores):
    cnt = s.src[1].dtype.count
    lanes = [const_node(k * 16 + j, INDEX_DTYPE)[0] for j in range(cnt)]
    val = lanes + ([Node(Ops.VECTORIZE, INDEX_DTYPE.vec(cnt), lanes)] if cnt > 1 else [])
    ix = Node(Ops.INDEX, shadow.dtype, [shadow, s.src[0].src[1]])
    new = [*val, ix, Node(Ops.STORE, dtypes.void, [ix, val[-1], *s.src[2:]])]
    pos = g.nodes.index(s) + 1
    g.nodes[pos:pos] = new
  g.nodes.append(shadow)
  try:
    em = emulate(g.program(check=False), [*case.inputs, np.full(size, -1, np.int32)], case.vals, strict=False)
  except Exception: return f"STORE {_dt(target.dtype.base)}"
  w = int(em.buffers[-1][m.element])
  if w < 0: return f"STORE {_dt(target.dtype.base)}"
  store, lane = stores[w // 16], w % 16
  i = index[id(store.src[1])]
  while p.uops[i].op in (Ops.GEP, Ops.VECTORIZE, Ops.ASSIGN):
    u = p.uops[i]
    if u.op is Ops.VECTORIZE: i, lane = u.src[lane], 0
    elif u.op is Ops.GEP: i, lane = u.src[0], u.arg[lane]
    else: i = u.src[1]
  return op_key(p, i)


PROBED = GroupOp.ALU | {Ops.CAST, Ops.BITCAST, Ops.LOAD, Ops.WMMA}

def probe(case: Case) -> tuple[Case, list[int]]:
  """The case with the value of every ALU, CAST, BITCAST, LOAD and WMMA uop also stored, per thread, into a buffer of
  its own: (the probe case, probed uop indices of the original program). The probe buffers come first (buffer k holds
  probed[k]), so the first buffer in which a backend differs from the emulator names the first op that went wrong.
  Thread t stores at [t*count, (t+1)*count), t the linear thread id built from the SPECIALs (moved to the top: they
  have no srcs); in a loop the last iteration's value stays, under an IF the value of the threads that took it."""
  p = case.program
  g = Graph.from_program(p)
  _, index, _ = g.linearize()
  specials = [n for n in g.nodes if n.op is Ops.SPECIAL]
  threads = 1
  for sp in specials: threads *= sp.arg[1]
  tid = Node(Ops.CONST, INDEX_DTYPE, (), 0)
  top = [*specials, tid]
  for sp in specials:
    size = Node(Ops.CONST, INDEX_DTYPE, (), sp.arg[1])
    mul = Node(Ops.MUL, INDEX_DTYPE, [tid, size])
    tid = Node(Ops.ADD, INDEX_DTYPE, [mul, sp])
    top += [size, mul, tid]
  g.nodes = top + [n for n in g.nodes if n.op is not Ops.SPECIAL]
  bufs, probed = [], []
  for n in [n for n in g.nodes if n.op in PROBED]:
    cnt = n.dtype.count
    buf = Node(Ops.DEFINE_GLOBAL, n.dtype.scalar().ptr(threads * cnt))
    k = Node(Ops.CONST, INDEX_DTYPE, (), cnt)
    at = Node(Ops.MUL, INDEX_DTYPE, [tid, k])
    ix = Node(Ops.INDEX, buf.dtype, [buf, at])
    pos = g.nodes.index(n) + 1
    g.nodes[pos:pos] = [k, at, ix, Node(Ops.STORE, dtypes.void, [ix, n])]
    bufs.append(buf)
    probed.append(index[id(n)])
  g.nodes[0:0] = bufs
  zeros = [np.zeros(b.dtype.size, to_np(b.dtype.base)) for b in bufs]
  return Case(g.program(p.name), zeros + list(case.inputs), case.vals), probed
