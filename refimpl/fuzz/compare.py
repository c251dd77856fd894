"""How the fuzzer compares a backend's buffers with the emulator's, element by element, with no false alarms.

The emulator gives, per output element, its reference value and two masks: undefined (never compared) and loose (not
bit-exact; see refimpl/emulator/machine.py). A loose element can be loose for different reasons, so the fuzzer adds a
static *kind* per buffer, the join of the kinds of every value stored into it (a dataflow fixpoint over the program):

  EXACT    no looseness can reach it                              exact elements: bit for bit, every NaN one value
  NANPAY   floats whose only looseness is a NaN's payload          loose elements too: as EXACT (NaN == NaN)
           (ADD SUB MUL FDIV RECIP SQRT NEG and float CASTs of
           NANPAY/EXACT operands, and moves of such values)
  TOL(b)   results of EXP2/LOG2/SIN on NANPAY/EXACT operands,      loose elements: within b ulps of the reference (the
           moved but not computed on                               op's bound, refimpl.spec.ulp_bound); where the
                                                                   reference is NaN, +-inf or +-0 exactly that value
  SET      results of float MULACC / MAX on NANPAY/EXACT operands  loose elements: equal (as EXACT) to the reference or
           (the allowed sets {fused, unfused} and {+0, -0})        to the *variant* run: the emulator on the program with
                                                                   every float MULACC unfused (MUL then ADD) and every
                                                                   float MAX(+0, -0) giving -0 (see `variant_program`)
           NEG of a TOL or SET value keeps its kind (a sign flip moves the error or the set member exactly)
  UNKNOWN  anything else computed from a TOL or SET value (a chain, or a discontinuous op such as a compare or a float->int
           CAST), WMMA results (every element is loose), BITCASTs of NaN-loose floats: loose elements are skipped
  WILD     a value whose *control* was loose: stored through an index, or under a gate, an IF or a RANGE bound, that
           came from anything but EXACT, or a BITCAST of a NaN CONST (the IR leaves its bits open while the emulator
           reads them as exact): every element of the buffer is skipped, because the emulator's masks follow data, not
           control (a store that a loose gate skips leaves an element the emulator calls exact)

Joins: WILD > UNKNOWN > {TOL, SET} > NANPAY > EXACT; TOL with SET is UNKNOWN; TOL with TOL keeps the larger bound.
Exact elements (loose mask false) are always compared bit for bit (NaN == NaN for floats), whatever the kind.
The rules are deliberately one op deep (NEG aside): a tolerance that grows along a chain would need per-op error
propagation, which is not sound through cancellation (ADD/SUB) or across subnormals (CASTs); the skipped elements are
counted and shown in the campaign summary.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from refimpl import spec
from refimpl.dtype import DType, dtypes, to_np
from refimpl.fuzz.graph import Graph, Node, const_node
from refimpl.ir import GroupOp, Ops, Program
from refimpl.testing.compare import same_value, ulp_distance

EXACT, NANPAY, TOL, SET, UNKNOWN, WILD = range(6)
LEVEL_NAMES = ("exact", "nan-payload", "tolerance", "allowed-set", "unknown", "wild")
Kind = tuple[int, int]  # (level, ulp bound for TOL)
K_EXACT, K_NAN, K_SET, K_UNKNOWN, K_WILD = (EXACT, 0), (NANPAY, 0), (SET, 0), (UNKNOWN, 0), (WILD, 0)
MOVES = frozenset({Ops.GEP, Ops.VECTORIZE})
FLOAT_EXACT_OPS = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIP, Ops.SQRT, Ops.NEG})


def join(a: Kind, b: Kind) -> Kind:
  if WILD in (a[0], b[0]): return K_WILD
  if UNKNOWN in (a[0], b[0]) or {a[0], b[0]} == {TOL, SET}: return K_UNKNOWN
  if a[0] == b[0] == TOL: return (TOL, max(a[1], b[1]))
  return max(a, b)

def _join_all(ks) -> Kind:
  out = K_EXACT
  for k in ks: out = join(out, k)
  return out

def _settled(k: Kind) -> bool: return k[0] <= NANPAY


@dataclass
class Kinds:
  """The result of the analysis: per uop its kind, per buffer uop (DEFINE_GLOBAL/LOCAL) the kind of its contents."""
  values: list[Kind]
  buffers: dict[int, Kind]
  cnan: list[bool] = field(default_factory=list)

  def of_global(self, program: Program) -> list[Kind]:
    """The kind of each DEFINE_GLOBAL's contents, in buffer-number order."""
    return [self.buffers[i] for i, u in sorted(((i, u) for i, u in enumerate(program.uops) if u.op is Ops.DEFINE_GLOBAL),
                                               key=lambda t: t[1].arg)]


def analyze(program: Program) -> Kinds:
  """The kinds of every value and buffer (see the module docstring), iterated to a fixpoint. Beside the kinds, `cnan`
  marks values that may be a NaN CONST moved unchanged (through GEP, VECTORIZE, WHERE, memory and accumulators)."""
  uops = program.uops
  n = len(uops)
  kinds: list[Kind] = [K_EXACT] * n
  cnan = [False] * n
  bufs = {i: K_EXACT for i, u in enumerate(uops) if u.op in GroupOp.Buffer}
  accs = {i: K_EXACT for i, u in enumerate(uops) if u.op is Ops.DEFINE_ACC}
  nan_in: dict[int, bool] = {i: False for i in (*bufs, *accs)}  # buffers and accumulators that may hold a NaN CONST
  while True:
    before = (list(kinds), dict(bufs), dict(accs), list(cnan), dict(nan_in))
    wild_blocks: list[bool] = []
    for i, u in enumerate(uops):
      if u.op in GroupOp.BlockEnd:
        wild_blocks.pop()
        continue
      ks = [kinds[j] for j in u.src]
      k = _transfer(uops, i, u, ks, bufs, accs)
      nan = False
      if u.op is Ops.CONST: nan = isinstance(u.arg, float) and u.arg != u.arg
      elif u.op in MOVES: nan = any(cnan[j] for j in u.src)
      elif u.op is Ops.WHERE: nan = cnan[u.src[1]] or cnan[u.src[2]]
      elif u.op is Ops.LOAD: nan = nan_in[uops[u.src[0]].src[0]] or (len(u.src) == 3 and cnan[u.src[1]])
      elif u.op is Ops.DEFINE_ACC:
        nan_in[i] = nan_in[i] or cnan[u.src[0]]
        accs[i] = join(accs[i], ks[0])
        k, nan = accs[i], nan_in[i]
      elif u.op is Ops.ASSIGN:
        a = u.src[0]
        nan_in[a] = nan_in[a] or cnan[u.src[1]]
        accs[a] = join(accs[a], K_WILD if any(wild_blocks) else ks[1])
        k, nan = accs[a], nan_in[a]
      elif u.op is Ops.BITCAST and cnan[u.src[0]] and dtypes.is_float(uops[u.src[0]].dtype): k = K_WILD
      elif u.op is Ops.STORE:
        b = uops[u.src[0]].src[0]
        ctrl_loose = any(wild_blocks) or ks[0] != K_EXACT or (len(ks) == 3 and ks[2] != K_EXACT)
        bufs[b] = join(bufs[b], K_WILD if ctrl_loose else ks[1])
        nan_in[b] = nan_in[b] or cnan[u.src[1]]
      if u.op in GroupOp.BlockStart: wild_blocks.append(any(x != K_EXACT for x in ks))
      kinds[i], cnan[i] = k, nan
    if (kinds, bufs, accs, cnan, nan_in) == before: return Kinds(kinds, bufs, cnan)


def _transfer(uops, i: int, u, ks: list[Kind], bufs: dict[int, Kind], accs: dict[int, Kind]) -> Kind:
  """The kind of uop i from its srcs' kinds (accumulators, stores and blocks are handled by analyze)."""
  op = u.op
  if op is Ops.CONST: return K_NAN if isinstance(u.arg, float) and u.arg != u.arg else K_EXACT
  if op in GroupOp.Buffer: return bufs[i]
  if op in (Ops.SPECIAL, Ops.DEFINE_VAR, Ops.RANGE, Ops.STORE, Ops.IF, Ops.BARRIER): return K_EXACT
  if op is Ops.INDEX: return K_EXACT if ks[1] == K_EXACT else K_WILD
  if op is Ops.LOAD:
    k = bufs[uops[u.src[0]].src[0]] if ks[0] == K_EXACT else K_WILD
    if len(ks) == 3: k = join(join(k, ks[1]), K_EXACT if ks[2] == K_EXACT else K_UNKNOWN)
    return k
  if op is Ops.DEFINE_ACC: return join(accs[i], ks[0])
  if op is Ops.ASSIGN: return accs[u.src[0]]
  if op in MOVES: return _join_all(ks)
  if op is Ops.WMMA: return join(_join_all(ks), K_UNKNOWN)
  top = _join_all(ks)
  if top == K_WILD: return K_WILD
  if op is Ops.WHERE: return (_join_all(ks[1:]) if ks[0] == K_EXACT else join(_join_all(ks[1:]), K_UNKNOWN))
  src = uops[u.src[-1]].dtype.scalar()
  if op in (Ops.CAST, Ops.BITCAST):
    dst = u.dtype.scalar()
    if op is Ops.BITCAST:
      if dtypes.is_float(src) and top != K_EXACT: return K_UNKNOWN  # the bits of a NaN are open
      return top
    if not _settled(top): return K_UNKNOWN
    return (K_NAN if dtypes.is_float(dst) else K_EXACT)
  if not dtypes.is_float(src): return (K_EXACT if top == K_EXACT else K_UNKNOWN)
  if op is Ops.NEG and top[0] in (TOL, SET): return top  # a sign flip: the bound, or the allowed set (negated), holds
  if not _settled(top): return K_UNKNOWN
  if op in GroupOp.Transcendental: return (TOL, spec.ulp_bound(op, src) or 0)
  if op in (Ops.MULACC, Ops.MAX): return K_SET
  if op in GroupOp.Comparison: return K_EXACT
  return K_NAN


def variant_program(program: Program) -> Program | None:
  """The program with the other member of each allowed set: float MULACC(a, b, c) as ADD(MUL(a, b), c) (unfused), and
  float MAX(a, b) as WHERE(a != 0 | b != 0, MAX(a, b), NEG(MAX(NEG a, NEG b))), which is MAX except that max(+0, -0)
  is -0. None when the program has neither."""
  g = Graph.from_program(program)
  changed = False
  for n in list(g.nodes):
    if n.op not in (Ops.MULACC, Ops.MAX) or not dtypes.is_float(n.dtype): continue
    changed = True
    a, b = n.src[0], n.src[1]
    if n.op is Ops.MULACC:
      mul = Node(Ops.MUL, n.dtype, [a, b])
      g.insert_before(n, [mul])
      n.op, n.src = Ops.ADD, [mul, n.src[2]]
      continue
    cnt = n.dtype.count
    bdt = dtypes.bool.vec(cnt) if cnt > 1 else dtypes.bool
    zero = const_node(0.0, n.dtype)
    nza, nzb = Node(Ops.CMPNE, bdt, [a, zero[-1]]), Node(Ops.CMPNE, bdt, [b, zero[-1]])
    anynz = Node(Ops.OR, bdt, [nza, nzb])
    na, nb = Node(Ops.NEG, n.dtype, [a]), Node(Ops.NEG, n.dtype, [b])
    mx, mn = Node(Ops.MAX, n.dtype, [a, b]), Node(Ops.MAX, n.dtype, [na, nb])
    neg = Node(Ops.NEG, n.dtype, [mn])
    g.insert_before(n, zero + [nza, nzb, anynz, na, nb, mx, mn, neg])
    n.op, n.src = Ops.WHERE, [anynz, mx, neg]
  return g.program(check=False) if changed else None


def needs_variant(kinds: list[Kind]) -> bool: return any(k[0] == SET for k in kinds)


@dataclass
class Mismatch:
  """The first element of a buffer that breaks its rule."""
  buffer: int
  element: int
  rule: str
  dtype: DType
  expected: np.ndarray
  got: np.ndarray
  alternative: np.ndarray | None = None

  def describe(self) -> str:
    def show(a: np.ndarray) -> str:
      v = a[self.element]
      bits = int(a[self.element:self.element + 1].view(f"u{a.itemsize}")[0])
      return f"{v!r} (0x{bits:0{2 * a.itemsize}x})"
    alt = "" if self.alternative is None else f" or {show(self.alternative)}"
    return f"buffer {self.buffer} ({self.dtype.name}) element {self.element}: expected {show(self.expected)}{alt}, " \
           f"got {show(self.got)} [{self.rule}]"


@dataclass
class Tally:
  """How many elements were compared, and by which rule."""
  exact: int = 0
  loose: int = 0
  skipped: int = 0

  def add(self, o: Tally) -> None:
    self.exact, self.loose, self.skipped = self.exact + o.exact, self.loose + o.loose, self.skipped + o.skipped


def compare(program: Program, expected: list[np.ndarray], undefined: list[np.ndarray], loose: list[np.ndarray],
            kinds: list[Kind], variant: list[np.ndarray] | None, got: list[np.ndarray]) -> tuple[Mismatch | None, Tally]:
  """Checks every buffer of a backend's run (`got`) against the emulator's by the rules above; (first mismatch, tally)."""
  tally = Tally()
  first: Mismatch | None = None
  bufs = program.buffers
  for b, (ref, act, und, lse, kind) in enumerate(zip(expected, got, undefined, loose, kinds)):
    dt = bufs[b].base
    act = np.asarray(act).view(to_np(dt)) if act.dtype != to_np(dt) else act
    if kind[0] == WILD:
      tally.skipped += ref.size
      continue
    defined = ~und
    exact_l, loose_l = defined & ~lse, defined & lse
    good = np.ones(ref.shape, bool)
    good[exact_l] = same_value(act[exact_l], ref[exact_l])
    rule, alt = "exact", None
    if loose_l.any():
      if kind[0] <= NANPAY: good[loose_l] = same_value(act[loose_l], ref[loose_l])
      elif kind[0] == TOL:
        r, a = ref[loose_l], act[loose_l]
        wide = r.astype(np.float64)
        special = ~np.isfinite(wide) | (wide == 0)
        ok = np.where(special, same_value(a, r), ulp_distance(a, r) <= kind[1])
        good[loose_l] = ok
        rule = f"tolerance {kind[1]} ulp"
      elif kind[0] == SET:
        assert variant is not None, "a SET buffer needs the variant run"
        good[loose_l] = same_value(act[loose_l], ref[loose_l]) | same_value(act[loose_l], variant[b][loose_l])
        rule, alt = "allowed set", variant[b]
      else: loose_l = np.zeros_like(loose_l)
    tally.exact += int(exact_l.sum())
    tally.loose += int(loose_l.sum())
    tally.skipped += int(ref.size - exact_l.sum() - loose_l.sum())
    bad = ~good & (exact_l | loose_l)
    if first is None and bad.any():
      e = int(np.argmax(bad))
      first = Mismatch(b, e, "exact" if exact_l[e] or kind[0] <= NANPAY else rule, dt, ref, act,
                       alt if loose_l[e] and kind[0] == SET else None)
  return first, tally


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
