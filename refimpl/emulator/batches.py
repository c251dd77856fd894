"""Batches: the isomorphic ops of a straight-line stretch, run as one numpy call over their stacked lanes.

tinygrad unrolls its tiles: an upcast kernel computes each accumulator's epilogue (a GELU after a matmul, a softmax's
scaling) and each output's unrolled sum with the same ops once per element of the tile, so a stretch (straight.py)
holds k copies of an op, each a numpy call over the launch's lanes. A *batch* is k such ops of one stretch: the same
exact path (Plan.exact: one ufunc, WHERE or conversion) on the same scalar dtypes, every operand of every one of them
set before the first of them. It runs where its first op stands: each operand as one array of k rows (an operand all
of them read, once; one that is an earlier batch's ops, that batch's result or the rows of it they read; any other,
the k values stacked), the rule applied once, and row j of the result is op j's value. GEPs that pick one element of
a vector (the elements of tinygrad's vector loads, which the copies' chains start from) make batches too: the distinct
vectors stacked once, each op's element picked (`_pick_step`), so that the batches after them read their rows.

A batch computes what its ops' own steps compute, element for element: the rule is lane-wise (stacking lanes changes
no element), defined on every lane and reads nothing but its operands, so computing an op earlier than it stands, after
its operands and before its uses, is not visible. Where an operand is not exact, the ops' own steps (straight.exact_step,
which calls the handler) run there instead, one by one.

`batches` places them: in program order, an op joins the first batch of its key that stands after every operand of the
op (an operand a batch sets is set where that batch stands; a register, by the stretch's last ASSIGN before the op), or
opens a new one where it stands; so the k copies of a chain fall into one batch per step of the chain. A batch that
costs more than its ops' own steps (`_pays`) is dissolved, and the placing done again without its ops. compile_stretch
makes the steps through `StretchBatches`. settings.BATCHES off: no batches (for comparisons).
"""
from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence

import numpy as np

from refimpl.emulator import settings
from refimpl.emulator.plan import Kind, Plan
from refimpl.emulator.state import Machine
from refimpl.emulator.values import Value

Step = Callable[[Machine, list], None]  # straight.Step
# what a batch costs beside the numpy work its ops' own steps do too, in units of one op's own step (about a microsecond
# here: its call, the ufunc's overhead, the NaN check, its Value): once; per op (its Value); per operand it stacks value
# by value, once, per op, and per element stacked (a copy). It pays where it saves more steps than that: `_pays`.
BATCH_COST, OP_COST = 3.0, 0.4
GATHER_COST, ROW_COST, ELEMENT_COST = 1.5, 0.2, 0.0001
MIN_BATCH = 4
# tuples, not sets: membership by identity, where a set would hash each Enum member in Python
REGISTERS = (Kind.DEFINE_ACC, Kind.ASSIGN)  # read as their register, which an ASSIGN of the stretch changes
# exact paths that are a lane-wise rule, defined everywhere, and GEP's, the pick of an element
BATCHED = (Kind.UFUNC_ALU, Kind.WHERE, Kind.CONVERT, Kind.GEP)


def batch_key(plan: Plan, i: int) -> tuple | None:
  """What the ops of one batch share: the kind and exact path's rule (a conversion's: its op, as conversion_rule makes
  one per op and dtypes), the result's maker and the scalar dtypes of the value and operands; for a GEP of one element,
  the vector's dtype; None for an op that joins none (no such exact path, or a vector)."""
  kind = plan.kinds[i]
  if kind not in BATCHED or i not in plan.exact: return None
  u, path = plan.uops[i], plan.exact[i]
  if kind is Kind.GEP:  # a pick of one element of a vector: every element of every vector of one dtype (`_pick_step`)
    return (kind, plan.uops[u.src[0]].dtype) if u.dtype.count == 1 else None
  types = (u.dtype, *(plan.uops[j].dtype for j in path.operands))
  if any(t is None or t.count != 1 for t in types): return None
  return kind, u.op if kind is Kind.CONVERT else path.rule, path.result, types


def batches(plan: Plan, lo: int, hi: int) -> list[tuple[int, ...]]:
  """The batches of the stretch lo..hi-1, each its ops in order (module docstring: how they are placed)."""
  numbers: dict[tuple, int] = {}  # each distinct key as a small int, hashed once
  keys = {}
  for i in range(lo, hi):
    key = batch_key(plan, i)
    if key is not None: keys[i] = numbers.setdefault(key, len(numbers))
  dissolved: set[int] = set()
  while True:
    placed = _place(plan, lo, hi, {i: k for i, k in keys.items() if i not in dissolved})
    batch_of = {i: ops for ops in placed for i in ops}
    unpaid = [ops for ops in placed if not _pays(plan, ops, batch_of)]
    if not unpaid: return placed
    for ops in unpaid: dissolved.update(ops)


def _pays(plan: Plan, ops: tuple[int, ...], batch_of: dict[int, tuple[int, ...]]) -> bool:
  """Whether a batch of k ops saves more than it costs (BATCH_COST ...): k > BATCH_COST + k * OP_COST + per operand
  stacked value by value (not one earlier batch's rows) GATHER_COST + k * (ROW_COST + lanes * ELEMENT_COST); never
  where every operand is one value they all read (they would compute one value). Picks (GEPs) stack each distinct
  vector once: GATHER_COST + per vector ROW_COST + its elements * ELEMENT_COST."""
  k = len(ops)
  if plan.kinds[ops[0]] is Kind.GEP:  # picks: each distinct vector stacked, all its elements
    vectors = {plan.uops[i].src[0] for i in ops}
    count = plan.uops[plan.uops[ops[0]].src[0]].dtype.count  # the vectors' elements
    cost = BATCH_COST + k * OP_COST + GATHER_COST + len(vectors) * (ROW_COST + plan.grid.lanes * count * ELEMENT_COST)
    return k >= MIN_BATCH and k > cost
  slots = {tuple(plan.exact[i].operands[t] for i in ops) for t in range(len(plan.exact[ops[0]].operands))}
  stacked = [js for js in slots if len(set(js)) > 1]
  gathered = [js for js in stacked if js[0] not in batch_of or any(batch_of.get(j) is not batch_of[js[0]] for j in js)]
  cost = BATCH_COST + k * OP_COST + len(gathered) * (GATHER_COST + k * (ROW_COST + plan.grid.lanes * ELEMENT_COST))
  return bool(stacked) and k >= MIN_BATCH and k > cost


def _place(plan: Plan, lo: int, hi: int, keys: dict[int, int]) -> list[tuple[int, ...]]:
  """One placing (module docstring) of the stretch's ops that have a key in `keys` (a number per distinct batch_key):
  its batches of two ops or more."""
  set_at: dict[int, int] = {}  # op -> where its value is set, for ops a batch sets before they stand
  open_at: dict[int, list[int]] = {}  # key -> where its batches that may grow stand, ascending
  ops_at: dict[int, list[int]] = {}  # where a batch stands -> its ops
  assigned = lo - 1
  most = max(MIN_BATCH, settings.BATCH_ELEMENTS // max(1, plan.grid.lanes))
  for i in range(lo, hi):
    if plan.kinds[i] is Kind.ASSIGN: assigned = i
    key = keys.get(i)
    if key is None: continue
    ready = max(_set_where(plan, j, lo, assigned, set_at) for j in plan.exact[i].operands)
    at = open_at.setdefault(key, [])
    k = bisect.bisect_right(at, ready)  # the first batch of the key that stands after every operand
    if k == len(at):
      at.append(i)
      ops_at[i] = [i]
      continue
    ops = ops_at[at[k]]
    ops.append(i)
    set_at[i] = ops[0]
    if len(ops) == most: del at[k]
  return [tuple(ops) for _, ops in sorted(ops_at.items()) if len(ops) > 1]


def _set_where(plan: Plan, j: int, lo: int, assigned: int, set_at: dict[int, int]) -> int:
  """Where operand j's value is set, as a position of the stretch lo..: before it (lo - 1) for a value from before the
  stretch or one a run sets when it starts (Plan.preset); a register's, at the stretch's last ASSIGN so far."""
  if plan.kinds[j] in REGISTERS: return assigned
  if j < lo or j in plan.preset: return lo - 1
  return set_at.get(j, j)


class Stack:
  """A batch of a stretch: its ops, and the `eager` ones among them, (row, op), whose Values its step puts in the env
  (something reads them there: an op no batch runs, or a batch's read that is not of this one's rows). A run keeps the
  batch's result in Machine.stacked while its ops are exact (they are not where it ran their own steps); the rest of
  its ops' Values are put in the env (`write`) before a batch that reads its rows runs its ops' own steps."""
  def __init__(self, ops: Sequence[int]):
    self.ops, self.eager = tuple(ops), tuple(enumerate(ops))

  def hold(self, m: Machine, env: list, out: np.ndarray) -> None:
    """Keeps the batch's exact result for this run, and its eager ops' Values in the env."""
    m.stacked[self] = out
    for k, i in self.eager: env[i] = Value(out[k])

  def write(self, m: Machine, env: list) -> None:
    """Puts every op's Value in the env, where the run holds the batch's result."""
    out = m.stacked.get(self)
    if out is not None:
      for k, i in enumerate(self.ops): env[i] = Value(out[k])


def _own_steps(stack: Stack, read: Sequence[Stack], own: Sequence[Step]) -> Step:
  """The step that runs a batch's ops' own steps instead of it (an operand is not exact): the batches whose rows it
  reads first put their ops' Values in the env, where those steps read them."""
  def step(m: Machine, env: list) -> None:
    m.stacked.pop(stack, None)
    for other in read: other.write(m, env)
    for s in own: s(m, env)
  return step


class StretchBatches:
  """The batches of one stretch while compile_stretch makes its steps: `first` (the first op of each batch -> its ops,
  none with settings.BATCHES off), `step` makes a batch's step, `finish` marks each batch's eager ops once all are
  made."""
  def __init__(self, plan: Plan, lo: int, hi: int):
    self.plan = plan
    self.first = {ops[0]: ops for ops in batches(plan, lo, hi)} if settings.BATCHES else {}
    self.rows: dict[int, tuple[Stack, int]] = {}  # op -> (the Stack of the batch that computes it, its row there)
    self.env_reads: set[tuple[int, int]] = set()  # (op, operand) pairs a batch reads from the env
    self.stacks: list[Stack] = []

  def step(self, ops: Sequence[int], own: Sequence[Step], direct: Callable[[int], bool]) -> Step:
    """The step of the batch `ops`; own: its ops' own steps; direct(j): operand j's Value is env[j] itself."""
    make = _pick_step if self.plan.kinds[ops[0]] is Kind.GEP else _batch_step
    step, stack = make(self.plan, ops, own, direct, self.rows, self.env_reads)
    self.stacks.append(stack)
    return step

  def finish(self) -> None:
    """Each Stack's eager ops: those that an op which no batch runs reads, or a batch reads from the env."""
    users = self.plan.users
    for stack in self.stacks:
      stack.eager = tuple((k, i) for k, i in enumerate(stack.ops)
                          if any(u not in self.rows or (u, i) in self.env_reads for u in users.get(i, ())))


def _batch_step(plan: Plan, ops: Sequence[int], own: Sequence[Step], direct: Callable[[int], bool],
                rows: dict[int, tuple[Stack, int]], env_reads: set[tuple[int, int]]) -> tuple[Step, Stack]:
  """The step of a batch of ufuncs, WHERE or conversions (module docstring), and its Stack (StretchBatches.step's
  arguments; this batch's rows and reads are added)."""
  path = plan.exact[ops[0]]
  rule, result = path.rule, path.result
  slots = [tuple(plan.exact[i].operands[t] for i in ops) for t in range(len(path.operands))]
  same = [slots.index(js) for js in slots]  # an operand the ops read in two places is stacked once
  sources = []  # per operand: (all the ops read one value, the Stack whose rows they are or None, which rows, reads)
  for js in slots:
    sources.append(_source(js, direct, rows))
    if sources[-1][1] is None: env_reads.update(zip(ops, js))
  stack = Stack(ops)
  for k, i in enumerate(ops): rows[i] = (stack, k)
  instead = _own_steps(stack, [source[1] for source in sources if source[1] is not None], own)
  nan_marked = result is not Value  # the result's maker marks NaNs (values.ufunc_value, scalar_float_value)

  def step(m: Machine, env: list) -> None:
    args = []
    for t, (one, rows_of, index, reads) in enumerate(sources):
      if same[t] != t:
        args.append(args[same[t]])
        continue
      held = None if rows_of is None else m.stacked.get(rows_of)
      if held is not None:
        args.append(held if index is None else held[index])
        continue
      xs = [env[j] if dj else m.value_of(j) for j, dj in reads]
      for x in xs:
        if x.cert is not None: return instead(m, env)
      args.append(xs[0].v if one else _as_rows([x.v for x in xs]))
    out = rule(*args)
    if nan_marked and out.dtype.kind == "f":
      flat = out.reshape(-1)
      total = flat.dot(flat)  # NaN exactly where an element is (values.scalar_float_value)
      if total != total:
        m.stacked.pop(stack, None)
        for k, i in enumerate(ops): env[i] = result(out[k])
        return
    stack.hold(m, env, out)
  return step, stack


def _pick_step(plan: Plan, ops: Sequence[int], own: Sequence[Step], direct: Callable[[int], bool],
               rows: dict[int, tuple[Stack, int]], env_reads: set[tuple[int, int]]) -> tuple[Step, Stack]:
  """_batch_step of a batch of GEPs, each one element of a vector: the distinct vectors stacked, each element along the
  lanes ((vectors, elements, lanes)), and row j of the result the element op j picks from its vector."""
  sources = tuple(plan.uops[i].src[0] for i in ops)
  vectors = list(dict.fromkeys(sources))
  which, elements = np.array([vectors.index(j) for j in sources]), np.array([plan.uops[i].arg[0] for i in ops])
  reads = [(j, direct(j)) for j in vectors]
  env_reads.update(zip(ops, sources))
  stack = Stack(ops)
  for k, i in enumerate(ops): rows[i] = (stack, k)
  instead = _own_steps(stack, [], own)

  def step(m: Machine, env: list) -> None:
    xs = [env[j] if dj else m.value_of(j) for j, dj in reads]
    for x in xs:
      if x.cert is not None: return instead(m, env)
    stack.hold(m, env, _by_element([x.v for x in xs])[which, elements])
  return step, stack


def _by_element(vs: Sequence[np.ndarray]) -> np.ndarray:
  """Vector values (lanes, n) (some of them one row for every lane, (1, n)) as one (vectors, n, lanes) array."""
  lanes = max(len(v) for v in vs)
  out = np.empty((len(vs), vs[0].shape[1], lanes), vs[0].dtype)
  for k, v in enumerate(vs): out[k] = v.T
  return out


def _source(js: tuple[int, ...], direct: Callable[[int], bool], rows: dict[int, tuple[Stack, int]]) -> tuple:
  """How a batch reads one operand, js being each op's: (whether all read one value, the Stack that holds all of js or
  None, which of its rows are js (None: all, in order), each op's read from the env (j, direct))."""
  if len(set(js)) == 1: return True, None, None, ((js[0], direct(js[0])),)
  reads = tuple((j, direct(j)) for j in js)
  at = [rows.get(j) for j in js]
  if None in at or len({id(stack) for stack, _ in at}) != 1: return False, None, None, reads
  k = [row for _, row in at]
  if k == list(range(k[0], k[0] + len(k))): index = None if len(k) == len(at[0][0].ops) else slice(k[0], k[0] + len(k))
  else: index = np.array(k)
  return False, at[0][0], index, reads


def _as_rows(vs: Sequence[np.ndarray]) -> np.ndarray:
  """Lane values (some of them one value for every lane, (1,)) as the rows of one array."""
  lengths = set(map(len, vs))
  lanes = max(lengths)
  if len(lengths) == 1: return np.concatenate(vs).reshape(len(vs), lanes)
  out = np.empty((len(vs), lanes), vs[0].dtype)
  for k, v in enumerate(vs): out[k] = v
  return out
