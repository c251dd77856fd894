"""The static kind of each buffer of a program: what looseness can reach it (the fuzzer's comparison, expect.py,
reads it for the elements the emulator calls UNKNOWN), and whether an undefined value can reach control.

What the emulator cannot state element by element is what a computation on a loose value may give; for that the
fuzzer adds a static *kind* per buffer (`StaticKind`), the join of the kinds of every value stored into it (a dataflow
fixpoint over the program), read only for the buffer's UNKNOWN elements (and WILD, for all of them):

  CLEAN    no looseness can reach it
  NANPAY   floats whose only looseness is a NaN's payload (ADD SUB MUL FDIV RECIP SQRT NEG TRUNC and float CASTs of
           NANPAY/CLEAN operands, and moves of such values)
  TOL(b)   results of a tolerance rule (alu's `@loose(TOLERANCE)`) on NANPAY/CLEAN operands, moved but not computed on
  SET      results of a float allowed-set rule (`@loose(ALLOWED_SET)`) on NANPAY/CLEAN operands; NEG of a SET value (a
           sign flip moves the set member exactly): its UNKNOWN elements are compared as ALLOWED_SET
  BOUND(K) WMMA results on NANPAY/CLEAN operands (K: the largest reduction length), moved but not computed on; NEG of a
           BOUND value: its UNKNOWN elements are compared as ERROR_BOUND
  MONO(o)  chains of monotone ops on tolerance results: ADD, SUB, MUL or FDIV by a settled operand, NEG, SQRT, float
           CASTs, EXP2/LOG2 of an increasing chain, selects by a settled condition, memory and accumulators; o is the
           chain's direction in the errors (see `bracket`). NEG of a TOL value is MONO(DOWN). Its UNKNOWN elements
           must lie between the *below* and *above* runs, the emulator with every transcendental result moved b+1 ulps
           down (up), where those and the reference are finite (else skipped)
  OPAQUE   anything else computed from a loose value (a compare, a float->int CAST, MAX, a product of two loose
           values, a SET or BOUND value computed on), BITCASTs of NaN-loose floats. Values stored or assigned under a
           loose IF gate or a loose STORE gate, and LOADs through a loose index, are OPAQUE too: the emulator's control
           rule marks every element their lanes store, or might have stored had the gate gone the other way, so the
           buffer's other elements are still compared by their levels
  WILD     a STORE through a loose index or under a loose RANGE bound (a backend may write another element, or run an
           iteration the emulator did not, and the emulator cannot mark those): every element of the buffer is skipped

Joins (`join`): WILD > OPAQUE > {TOL, SET, BOUND, MONO} > NANPAY > CLEAN. Of the middle four, TOL with TOL keeps the
larger bound, BOUND with BOUND the larger K, TOL with MONO is MONO (a tolerance result is an increasing chain of one
op), MONO with MONO keeps a direction both share; every other pair is OPAQUE. The kinds and the levels describe the
same loose elements (the levels strictly between EXACT and UNDEFINED), so a kind's rule holds for each of its buffer's
loose elements; an element's level, where it is not UNKNOWN, gives the sharper rule of the two.

Why MONO is sound (`bracket`). Each loose element of a MONO buffer is f(e1, e2, ...) where the e are the errors the
backend's transcendentals make (each within b ulps, so inside the nudges of the two runs) and every op of f is exact
(correctly rounded, so monotone) and monotone in each of its loose operands. The direction o tracks how f moves with
the errors: UP (non-decreasing in every one), DOWN, or EITHER (one of the two per element: a product by a value whose
sign is not known statically). Where the directions agree, moving every error down gives one end of f's range and
moving every error up the other, so the backend's value lies between the two runs' values. Two loose operands are
combined only when they share a direction (UP + UP), never UP with DOWN or EITHER with anything loose. Where both
ends are finite, no infinity or NaN arises in between: the ops of a chain carry an infinite operand to an infinite or
NaN result in the chain's direction (MAX, which can drop one, is not a chain op).
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from refimpl import spec
from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.certainty import Certainty
from refimpl.ir import GroupOp, Ops, Program


class StaticKind(IntEnum):
  """What looseness can reach a value or a buffer (the module docstring), in the order of `join`."""
  CLEAN = 0
  NANPAY = 1
  TOL = 2
  SET = 3
  BOUND = 4
  MONO = 5
  OPAQUE = 6
  WILD = 7

CLEAN, NANPAY, TOL, SET, BOUND, MONO, OPAQUE, WILD = StaticKind
Kind = tuple[StaticKind, int]  # (static kind, parameter: the ulp bound of TOL, the K of BOUND, the direction of MONO)
UP, DOWN, EITHER = 1, -1, 0  # MONO's direction in the errors
K_CLEAN, K_NAN, K_SET, K_OPAQUE, K_WILD = (CLEAN, 0), (NANPAY, 0), (SET, 0), (OPAQUE, 0), (WILD, 0)
MOVES = frozenset({Ops.GEP, Ops.VECTORIZE})
MIDDLE_KINDS = frozenset({TOL, SET, BOUND, MONO})
# the static kind of a loose rule's result on settled operands, by the level its `@loose` declares
KIND_OF_LEVEL = {Certainty.TOLERANCE: TOL, Certainty.ALLOWED_SET: SET}


def _direction(k: Kind) -> int | None:
  """The direction of a chain value (a tolerance result is an increasing chain of one op), None for other kinds."""
  if k[0] == TOL: return UP
  return k[1] if k[0] == MONO else None

def _either(a: int, b: int) -> int: return a if a == b else EITHER

def join(a: Kind, b: Kind) -> Kind:
  """The kind of a place that holds a value of kind a on some elements or executions and of kind b on others."""
  if WILD in (a[0], b[0]): return K_WILD
  if OPAQUE in (a[0], b[0]): return K_OPAQUE
  if a[0] not in MIDDLE_KINDS or b[0] not in MIDDLE_KINDS: return max(a, b)
  if a[0] == b[0] and a[0] in (TOL, BOUND): return (a[0], max(a[1], b[1]))
  if a[0] == b[0] == SET: return K_SET
  da, db = _direction(a), _direction(b)
  if da is None or db is None: return K_OPAQUE
  return (MONO, _either(da, db))

def _join_all(ks) -> Kind:
  out = K_CLEAN
  for k in ks: out = join(out, k)
  return out

def _settled(k: Kind) -> bool: return k[0] <= NANPAY


@dataclass
class Kinds:
  """The result of the analysis: per uop its kind, per buffer uop (DEFINE_GLOBAL/LOCAL) the kind of its contents."""
  values: list[Kind]
  buffers: dict[int, Kind]

  def of_global(self, program: Program) -> list[Kind]:
    """The kind of each DEFINE_GLOBAL's contents, in buffer-number order."""
    return [self.buffers[i] for i, u in sorted(((i, u) for i, u in enumerate(program.uops) if u.op is Ops.DEFINE_GLOBAL),
                                               key=lambda t: t[1].arg)]


def analyze(program: Program) -> Kinds:
  """The kinds of every value and buffer (see the module docstring), iterated to a fixpoint."""
  uops = program.uops
  kinds: list[Kind] = [K_CLEAN] * len(uops)
  bufs = {i: K_CLEAN for i, u in enumerate(uops) if u.op in GroupOp.Buffer}
  accs = {i: K_CLEAN for i, u in enumerate(uops) if u.op is Ops.DEFINE_ACC}
  while True:
    before = (list(kinds), dict(bufs), dict(accs))
    blocks: list[Kind] = []  # per open block: OPAQUE under a loose IF gate, WILD under a loose RANGE bound
    for i, u in enumerate(uops):
      if u.op in GroupOp.BlockEnd:
        blocks.pop()
        continue
      ks = [kinds[j] for j in u.src]
      k = _transfer(uops, i, u, ks, bufs, accs)
      if u.op is Ops.DEFINE_ACC:
        accs[i] = join(accs[i], ks[0])
        k = accs[i]
      elif u.op is Ops.ASSIGN:
        a = u.src[0]
        accs[a] = join(accs[a], join(_assign_control(blocks), ks[1]))
        k = accs[a]
      elif u.op is Ops.STORE:
        b = uops[u.src[0]].src[0]
        bufs[b] = join(bufs[b], join(_store_control(blocks, ks), ks[1]))
      if u.op in GroupOp.BlockStart: blocks.append(_block_control(u.op, ks))
      kinds[i] = k
    if (kinds, bufs, accs) == before: return Kinds(kinds, bufs)


def _block_control(op: Ops, ks: list[Kind]) -> Kind:
  """The control kind a block gives what runs in it: CLEAN, OPAQUE under a loose IF gate (the emulator marks what
  its lanes store or assign, and what they might have: the control rule), WILD under a loose RANGE bound (iterations
  past the bound that the emulator did not run store elements it never marks)."""
  if all(k == K_CLEAN for k in ks): return K_CLEAN
  return K_WILD if op is Ops.RANGE else K_OPAQUE

def _assign_control(blocks: list[Kind]) -> Kind:
  """The control kind of an ASSIGN: OPAQUE under any loose block (the emulator marks the register loose there)."""
  return K_OPAQUE if any(k != K_CLEAN for k in blocks) else K_CLEAN

def _store_control(blocks: list[Kind], ks: list[Kind]) -> Kind:
  """The control kind of a STORE: its blocks', OPAQUE under a loose gate, WILD through a loose index (a backend may
  write another element than the emulator did)."""
  k = _join_all(blocks)
  if ks[0] != K_CLEAN: k = join(k, K_WILD)
  if len(ks) == 3 and ks[2] != K_CLEAN: k = join(k, K_OPAQUE)
  return k

def _transfer(uops, i: int, u, ks: list[Kind], bufs: dict[int, Kind], accs: dict[int, Kind]) -> Kind:
  """The kind of uop i from its srcs' kinds (accumulators, stores and blocks are handled by analyze)."""
  op = u.op
  if op is Ops.CONST: return K_NAN if isinstance(u.arg, float) and u.arg != u.arg else K_CLEAN
  if op in GroupOp.Buffer: return bufs[i]
  if op in (Ops.SPECIAL, Ops.DEFINE_VAR, Ops.RANGE, Ops.STORE, Ops.IF, Ops.BARRIER): return K_CLEAN
  if op is Ops.INDEX: return K_CLEAN if ks[1] == K_CLEAN else K_WILD
  if op is Ops.LOAD:
    k = bufs[uops[u.src[0]].src[0]] if ks[0] == K_CLEAN else K_OPAQUE  # a loose index: a loose element, some value
    if len(ks) == 3: k = join(join(k, ks[1]), K_CLEAN if ks[2] == K_CLEAN else K_OPAQUE)
    return k
  if op is Ops.DEFINE_ACC: return join(accs[i], ks[0])
  if op is Ops.ASSIGN: return accs[u.src[0]]
  if op in MOVES: return _join_all(ks)
  top = _join_all(ks)
  if top == K_WILD: return K_WILD
  if op is Ops.WMMA: return (BOUND, u.arg[2]) if _settled(top) else K_OPAQUE
  if op is Ops.WHERE: return (_join_all(ks[1:]) if ks[0] == K_CLEAN else join(_join_all(ks[1:]), K_OPAQUE))
  src = uops[u.src[-1]].dtype.scalar()
  if op in (Ops.CAST, Ops.BITCAST):
    dst = u.dtype.scalar()
    if op is Ops.BITCAST:
      if dtypes.is_float(src) and top != K_CLEAN: return K_OPAQUE  # the bits of a NaN are open
      return top
    if _settled(top): return K_NAN if dtypes.is_float(dst) else K_CLEAN
    return _chain(op, ks, uops, u) if dtypes.is_float(dst) else K_OPAQUE
  if not dtypes.is_float(src): return (K_CLEAN if top == K_CLEAN else K_OPAQUE)
  if op is Ops.NEG and top[0] in (SET, BOUND): return top  # a sign flip: the allowed set, or the bound, holds
  if not _settled(top): return _chain(op, ks, uops, u)
  level = declared_level(op)
  if level is not None: return (KIND_OF_LEVEL[level], spec.ulp_bound(op, src) or 0)
  if op in GroupOp.Comparison: return K_CLEAN
  return K_NAN

def declared_level(op: Ops) -> Certainty | None:
  """The level op's rule declares loose on floats (alu's `@loose`), None for an op without one."""
  declared = alu.looseness(op)
  return None if declared is None else declared.level


def _const_sign(uops, j: int) -> int | None:
  """The sign of uop j's value when it is a float CONST (or a VECTORIZE of one), else None."""
  u = uops[j]
  if u.op is Ops.VECTORIZE and len(set(u.src)) == 1: u = uops[u.src[0]]
  if u.op is not Ops.CONST or u.arg != u.arg: return None
  return (u.arg > 0) - (u.arg < 0) or UP  # times zero: a constant result, monotone either way

def _chain(op: Ops, ks: list[Kind], uops, u) -> Kind:
  """The kind of a float op with a loose operand: MONO with its direction where the op continues a monotone chain
  (the module docstring), else OPAQUE."""
  dirs = [_direction(k) if not _settled(k) else None for k in ks]
  loose = [j for j, k in enumerate(ks) if not _settled(k)]
  if any(dirs[j] is None for j in loose): return K_OPAQUE
  d = dirs[loose[0]]
  if op in (Ops.SQRT, Ops.CAST): return (MONO, d)  # exact and non-decreasing
  if op is Ops.NEG: return (MONO, -d)
  if op in (Ops.EXP2, Ops.LOG2): return (MONO, UP) if d == UP else K_OPAQUE  # increasing, and its own error too
  if op in (Ops.ADD, Ops.SUB):
    if op is Ops.SUB and dirs[1] is not None: dirs[1] = -dirs[1]
    ds = {dirs[j] for j in loose}
    if len(loose) == 2 and (len(ds) > 1 or EITHER in ds): return K_OPAQUE
    return (MONO, ds.pop())
  if op in (Ops.MUL, Ops.FDIV) and len(loose) == 1 and (op is Ops.MUL or loose == [0]):
    sign = _const_sign(uops, u.src[1 - loose[0]])
    return (MONO, EITHER if sign is None else d * sign)
  return K_OPAQUE


# the srcs of each op that decide control or addresses: an IF gate, RANGE bounds, an index, a LOAD/STORE gate
CONTROL_SRCS = {Ops.IF: slice(0, 1), Ops.RANGE: slice(None), Ops.INDEX: slice(1, None), Ops.LOAD: slice(2, None),
                Ops.STORE: slice(2, None)}

def control_taint(program: Program, sources: set[int]) -> bool:
  """Whether a value computed from the uops `sources` (undefined somewhere) reaches control: an IF gate, a RANGE bound,
  an index or a LOAD/STORE gate (through data, accumulators and memory). Such a program is never run natively: its
  undefined values could change which memory a backend touches, and the emulator's masks follow data only."""
  uops = program.uops
  tainted = set(sources)
  while True:
    before = len(tainted)
    for i, u in enumerate(uops):
      if i in tainted: continue
      if any(j in tainted for j in u.src) and u.op not in (Ops.STORE, Ops.INDEX):
        tainted.add(i)
        if u.op is Ops.ASSIGN: tainted.add(u.src[0])
      if u.op is Ops.STORE and u.src[1] in tainted: tainted.add(uops[u.src[0]].src[0])
      if u.op is Ops.LOAD and uops[u.src[0]].src[0] in tainted: tainted.add(i)
    if len(tainted) == before: break
  return any(j in tainted for u in uops if u.op in CONTROL_SRCS for j in u.src[CONTROL_SRCS[u.op]])
