"""The kinds of undefined behaviour (refimpl/emulator/ub.py): every rule of alu.py reports exactly the kinds it declares
(`@undefined`), on the dtypes the kind names; the executor reports the memory kinds; the fuzzer handles every kind
(generate.REWRITES rewrites each ALU kind away, case.discard_reason runs exactly the deferred ALU ones)."""
from __future__ import annotations

import itertools
import re

import numpy as np
import pytest

from refimpl.dtype import DType, dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.machine import emulate
from refimpl.emulator.ub import UB
from refimpl.fuzz.case import discard_reason
from refimpl.fuzz.generate import DISCARDS, REWRITES, discard_node, fix_node
from refimpl.fuzz.graph import Graph
from refimpl.ir import GroupOp, Ops, ProgramBuilder
from refimpl.spec import VALUE_DTYPES, accepts, undefined_kinds
from refimpl.testing.values import edge_values

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

I8, I32, U16, F32 = dtypes.int8, dtypes.int32, dtypes.uint16, dtypes.float32
RULE_FNS = list(dict.fromkeys(alu.ALU_RULES.values()))
OPS_OF = {fn: [op for op, f in alu.ALU_RULES.items() if f is fn] for fn in RULE_FNS}
ALU_KINDS = {k for fn in RULE_FNS for k in getattr(fn, "undefined", ())}

# operands in each domain: (op, operand dtype, operands) for ALU ops, (CAST, source, target, value) for casts
WITNESSES: dict[UB, list[tuple]] = {
  UB.DIVISOR_ZERO: [(Ops.IDIV, I8, (7, 0)), (Ops.MOD, dtypes.uint32, (7, 0))],
  UB.DIVISION_OVERFLOW: [(Ops.IDIV, I32, (-2**31, -1)), (Ops.MOD, dtypes.int64, (-2**63, -1))],
  UB.SHIFT_COUNT: [(Ops.SHL, U16, (1, 16)), (Ops.SHR, I8, (1, -1))],
  UB.CAST_RANGE: [(Ops.CAST, F32, I8, np.nan), (Ops.CAST, dtypes.float64, dtypes.uint32, -1.0),
                  (Ops.CAST, dtypes.fp8e4m3, I8, 320.0), (Ops.CAST, dtypes.float16, dtypes.int16, np.inf)],
}

def _run(w: tuple) -> alu.Outcome:
  """The Outcome of a witness."""
  if w[0] is Ops.CAST: return alu.exec_cast(np.array([w[3]]).astype(to_np(w[1])), w[1], w[2])
  op, dt, xs = w
  return alu.exec_alu(op, dt, *(np.array([x]).astype(to_np(dt)) for x in xs))

def _edges(dt: DType, n: int, rng: np.random.Generator) -> np.ndarray:
  """At most n edge values of dt: 0, 1, -1, the extremes and the shift widths always, the rest drawn."""
  e = edge_values(dt)
  if len(e) <= n: return e
  keep = [x for x in e if dtypes.is_int(dt) and int(x) in (0, 1, -1, 8 * dt.itemsize, dtypes.min(dt), dtypes.max(dt))]
  return np.concatenate([np.array(keep, e.dtype), rng.choice(e, n - len(keep), replace=False)])

def _lane_kinds(run, cols: list[np.ndarray]) -> set[UB]:
  """The kind of every undefined lane of run(*cols), each lane run alone (an Outcome names only its first)."""
  out = run(*cols)
  if out.undefined is None: return set()
  assert out.kind is not None and out.reason
  return {run(*(c[k:k + 1] for c in cols)).kind for k in np.flatnonzero(out.undefined)}

def _sweep_alu(op: Ops, dt: DType, rng: np.random.Generator) -> set[UB]:
  """The kinds op reports over every combination of edge operands of dtype dt."""
  n = {1: 64, 2: 24, 3: 8}[3 if op in GroupOp.Ternary else 2 if op in GroupOp.Binary else 1]
  vals = [_edges(dt, n, rng) for _ in range(3 if op in GroupOp.Ternary else 2 if op in GroupOp.Binary else 1)]
  if op is Ops.WHERE: vals[0] = np.array([False, True])
  cols = [np.array(c) for c in zip(*itertools.product(*vals))]
  return _lane_kinds(lambda *xs: alu.exec_alu(op, dt, *xs), cols)

def _sweep_cast(src: DType, rng: np.random.Generator) -> set[UB]:
  """The kinds CAST from src reports over its edge values, to every target."""
  x = _edges(src, 64, rng)
  return set().union(*(_lane_kinds(lambda v, dst=dst: alu.exec_cast(v, src, dst), [x]) for dst in VALUE_DTYPES))


@pytest.mark.parametrize("rule", RULE_FNS, ids=lambda fn: fn.__name__)
def test_rule_reports_exactly_its_declared_kinds(rule):
  """Rule: a rule's Outcome names a kind (the first undefined lane's) only if the rule declares it; each declared kind
  comes out of the rule on operands in its domain; over edge operands, op x dtype gives exactly the kinds
  spec.undefined_kinds(op, dtype) lists (those of the declaration that occur on the dtype)."""
  declared = set(getattr(rule, "undefined", ()))
  witnessed = {k for k, ws in WITNESSES.items() for w in ws if alu.ALU_RULES[w[0]] is rule}
  assert witnessed == declared
  for k in declared:
    for w in WITNESSES[k]:
      out = _run(w)
      assert out.kind is k and out.undefined.all() and out.reason, (w, out)
  rng = np.random.default_rng(7)
  for op in OPS_OF[rule]:
    for dt in VALUE_DTYPES:
      if not accepts(op, dt) or op is Ops.BITCAST: continue
      seen = _sweep_cast(dt, rng) if op is Ops.CAST else _sweep_alu(op, dt, rng)
      assert seen == set(undefined_kinds(op, dt)), (op, dt, seen)

@pytest.mark.parametrize("rule", RULE_FNS, ids=lambda fn: fn.__name__)
def test_rule_docstring_names_its_declared_kinds(rule):
  """Rule: the text of a rule (its docstring, printed in SPEC.md) names exactly the kinds it declares."""
  named = {UB[m] for m in re.findall(r"\b[A-Z][A-Z_]+[A-Z]\b", rule.__doc__) if m in UB.__members__}
  assert named == set(getattr(rule, "undefined", ()))


def _memory_program(kind: UB):
  """A four-thread program that hits one memory kind: a store past the end, four stores to one element, a read of a
  local never written, a read of an element another thread wrote (both read values are stored: their use)."""
  b = ProgramBuilder(kind.name.lower())
  out = b.global_buf(I32, 4)
  if kind is UB.UNINITIALISED:
    tmp, lid = b.local_buf(I32, 4), b.lidx(0, 4)
    b.store(out, lid, b.load(tmp, lid))
    return b.build()
  if kind is UB.RACY_READ:
    tmp, lid = b.local_buf(I32, 4), b.lidx(0, 4)
    b.store(tmp, lid, lid)
    b.store(out, lid, b.load(tmp, b.alu(Ops.AND, b.alu(Ops.ADD, lid, b.const(1, I32)), b.const(3, I32))))
    return b.build()
  g = b.gidx(0, 4)
  idx = {UB.OUT_OF_BOUNDS: lambda: b.alu(Ops.ADD, g, b.const(1, I32)), UB.RACE: lambda: b.const(0, I32)}[kind]()
  b.store(out, idx, g)
  return b.build()

@pytest.mark.parametrize("kind", [k for k in UB if k not in ALU_KINDS], ids=lambda k: k.name)
def test_machine_reports_each_memory_kind_on_its_events(kind):
  """Rule: every kind no ALU rule declares is one the executor reports (machine.py, memory.py); its events and its
  strict-mode exception carry it (a deferred kind's where the value it made is used: stored, with the LOAD as its
  origin), and the fuzzer never runs such a case natively (a memory kind)."""
  p = _memory_program(kind)
  events = emulate(p, [np.zeros(4, np.int32)], strict=False).events
  assert [e.kind for e in events] == [kind], events
  assert discard_reason(p, events) == f"undefined {kind.family} ({events[0].reason})"
  with pytest.raises(Exception) as e: emulate(p, [np.zeros(4, np.int32)])
  assert e.value.kind is kind
  if kind.deferred:
    assert e.value.op is Ops.STORE and e.value.use == "stored"
    assert e.value.origin.op is Ops.LOAD and e.value.origin.kind is kind


def _one_op(w: tuple) -> tuple[Graph, list[np.ndarray]]:
  """out[0] = the witness's op on its operands, loaded from buffers (one thread): its graph and its inputs."""
  b = ProgramBuilder("w")
  if w[0] is Ops.CAST:
    src, dst, xs = w[1], w[2], (w[3],)
  else: src, dst, xs = w[1], w[1], w[2]
  out = b.global_buf(dst, 1)
  ins = [b.global_buf(src, 1) for _ in xs]
  zero = b.const(0, I32)
  vals = [b.load(x, zero) for x in ins]
  b.store(out, zero, b.cast(vals[0], dst) if w[0] is Ops.CAST else b.alu(w[0], *vals))
  return Graph.from_program(b.build()), [np.array([x]).astype(to_np(src)) for x in xs]

def test_fix_node_rewrites_every_kind_an_alu_rule_declares():
  """Rule: generate.REWRITES has a rewrite for exactly the kinds the ALU rules declare, and fix_node, given an event's
  kind, makes each witness defined in one round."""
  assert set(REWRITES) == ALU_KINDS
  for kind, ws in WITNESSES.items():
    for w in ws:
      g, inputs = _one_op(w)
      out = np.zeros(1, to_np(g.globals()[0].dtype.base))
      _, _, order = g.linearize()
      events = emulate(g.program(), [out, *inputs], strict=False).events
      assert [e.kind for e in events] == [kind], (w, events)
      assert fix_node(g, order[(events[0].origin or events[0]).uop_index], events[0].kind)
      assert not emulate(g.program(), [out, *inputs], strict=False).events, w

def test_discard_node_keeps_each_deferred_alu_kind_and_discards_its_value():
  """Rule: generate.DISCARDS has a test for exactly the deferred kinds an ALU rule declares; discard_node keeps the op
  (it still computes the undefined value) and makes every use read WHERE(undefined there, 0, value): the witness
  becomes defined, stores 0, and the emulator still records the op as the origin of an undefined value."""
  assert set(DISCARDS) == {k for k in ALU_KINDS if k.deferred}
  for kind in DISCARDS:
    for w in WITNESSES[kind]:
      g, inputs = _one_op(w)
      out = np.zeros(1, to_np(g.globals()[0].dtype.base))
      _, _, order = g.linearize()
      events = emulate(g.program(), [out, *inputs], strict=False).events
      assert discard_node(g, order[events[0].origin.uop_index], events[0].kind)
      run = emulate(g.program(), [out, *inputs])
      assert run.buffers[0].tolist() == [0] and [d.kind for d in run.deferred] == [kind], w

def test_fix_node_leaves_the_memory_kinds_alone():
  """Rule: fix_node has no rewrite for a memory kind (generation avoids them by construction)."""
  for kind in set(UB) - ALU_KINDS:
    g = Graph.from_program(_memory_program(kind))
    assert not fix_node(g, g.nodes[-1], kind)

def test_discard_reason_runs_exactly_the_deferred_alu_kinds():
  """Rule: a case whose only undefined behaviour is a stored ALU value of a deferred kind is run natively (masked); one
  of an immediate kind is discarded, named by the kind's family."""
  for kind, ws in WITNESSES.items():
    g, inputs = _one_op(ws[0])
    p = g.program()
    events = emulate(p, [np.zeros(1, to_np(g.globals()[0].dtype.base)), *inputs], strict=False).events
    why = discard_reason(p, events)
    assert (why is None) == kind.deferred, (kind, why)
    if why is not None: assert why == f"undefined {kind.family} ({events[0].reason})"


@pytest.mark.parametrize("device", ["PYTHON", "CLANG"])
def test_eval_op_reports_the_kind_of_an_undefined_op(device):
  """Rule: refimpl.testing.eval_op raises UndefinedBehavior with the rule's kind, on the emulator and before a native
  run alike (an int32 division by zero is DIVISOR_ZERO; a shift by 40 is SHIFT_COUNT)."""
  from refimpl.errors import UndefinedBehavior
  from refimpl.testing.eval import eval_op
  x = np.array([7, 1], np.int32)
  cases = ((Ops.IDIV, np.array([0, 1], np.int32), UB.DIVISOR_ZERO), (Ops.SHL, np.array([1, 40], np.int32), UB.SHIFT_COUNT))
  for op, y, kind in cases:
    with pytest.raises(UndefinedBehavior) as e: eval_op(op, x, y, device=device)
    assert e.value.kind is kind, e.value
