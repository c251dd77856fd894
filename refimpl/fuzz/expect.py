"""What the fuzzer expects of a backend's buffers, from the emulator's run, element by element, with no false alarms.

The emulator gives, per output element, its reference value and its certainty level (refimpl/emulator/certainty.py),
and each element is compared by its level's rule:

  EXACT, NAN_PAYLOAD  bit for bit, every NaN one value
  TOLERANCE           within the ULP bound of the program's tolerance ops on the buffer's dtype (the largest, if
                      several: the element is one of their results, moved); where the reference is NaN, +-inf or +-0,
                      exactly that value
  ERROR_BOUND         within the WMMA rule's error bound (emulator.compute.wmma_error_bound) of the reference, twice over (the
                      reference is one allowed execution), K the program's largest on that dtype; the *above* run gives
                      S = |c| + sum |a_k b_k|; a NaN reference is NAN_PAYLOAD, so it wants a NaN
  ALLOWED_SET         equal (as EXACT) to the reference or to the *below* run's value: the emulator on the program with
                      every float allowed-set op replaced by its set's other member, the ops its rule declares
                      (alu's `@loose(ALLOWED_SET, other=...)`: MULACC unfused, MAX(+0, -0) giving -0)
  UNKNOWN             by the buffer's static kind where that states a rule (below), else not compared
  UNDEFINED           not compared

Beside the levels, each buffer has a static kind (kinds.py: what looseness can reach it), read for its UNKNOWN elements
(and WILD, for all of them), and the comparison reads the *below* and *above* runs (variants.py) where a rule needs them.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from refimpl import spec
from refimpl.dtype import DType, dtypes, to_np
from refimpl.emulator.certainty import Certainty
from refimpl.emulator.compute import wmma_error_bound
from refimpl.fuzz.kinds import BOUND, MONO, SET, WILD, Kind, analyze, declared_level
from refimpl.fuzz.variants import sides_needed, variant_program
from refimpl.ir import Ops, Program
from refimpl.testing.compare import same_value, within_tolerance


@dataclass
class Side:
  """One run beside the reference: its buffers and undefined masks (see variant_program)."""
  buffers: list[np.ndarray]
  undefined: list[np.ndarray]


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


@dataclass
class Expected:
  """What the spec expects of a case's buffers: the reference run (buffers and each element's certainty level), each
  buffer's kind, and the runs beside it."""
  buffers: list[np.ndarray]
  certainty: list[np.ndarray]
  kinds: list[Kind]
  below: Side | None = None
  above: Side | None = None

  def check(self, program: Program, got: list[np.ndarray]) -> tuple[Mismatch | None, Tally]:
    return compare(program, self, got)


def expect(program: Program, reference, run) -> Expected:
  """The Expected of a program from its permissive reference Emulation; `run(program)` emulates a variant (with the
  case's inputs and vars) when a comparison needs one."""
  kinds = analyze(program).of_global(program)
  e = Expected(reference.buffers, reference.certainty, kinds)
  for side in sides_needed(reference.certainty, kinds):
    vp = variant_program(program, side)
    em = reference if vp is None else run(vp)
    if side < 0: e.below = Side(em.buffers, em.undefined)
    else: e.above = Side(em.buffers, em.undefined)
  return e


def _within_bracket(ref, got, lo, hi, known) -> tuple[np.ndarray, np.ndarray]:
  """(compared, good) of MONO elements: compared where the reference and both ends are finite and defined."""
  r, a, below, above = (x.astype(np.float64) for x in (ref, got, lo, hi))
  compared = known & np.isfinite(r) & np.isfinite(below) & np.isfinite(above)
  low, high = np.minimum(np.minimum(below, above), r), np.maximum(np.maximum(below, above), r)
  return compared, (low <= a) & (a <= high)

def _within_bound(ref, got, magnitude, known, dt: DType, k: int) -> tuple[np.ndarray, np.ndarray]:
  """(compared, good) of BOUND elements: a NaN reference wants a NaN; elsewhere |got - ref| <= twice the WMMA error
  bound where the magnitude sum S is finite (S rounded to dt is widened by one rounding: S (1 + eps) + tau; the above
  run's value is -S where the result was negated)."""
  r, a = ref.astype(np.float64), got.astype(np.float64)
  s = np.abs(magnitude.astype(np.float64))
  e, m = dtypes.finfo(dt)
  widened = s * (1 + 2.0 ** -m) + 2.0 ** (2 - 2 ** (e - 1) - m)
  nan = np.isnan(r)
  compared = known & (nan | np.isfinite(s))
  with np.errstate(invalid="ignore"):
    close = np.abs(a - r) <= 2 * wmma_error_bound(dt, k, widened)
  return compared, np.where(nan, np.isnan(a), close)


def _largest_bound(program: Program, dt: DType) -> int:
  """The largest ULP bound of the program's tolerance ops on dt: a TOLERANCE element of a dt buffer is some such op's
  result, moved (a computation on it is OPAQUE)."""
  ops = {u.op for u in program.uops if declared_level(u.op) is Certainty.TOLERANCE and u.dtype.scalar() == dt}
  return max((spec.ulp_bound(op, dt) or 0 for op in ops), default=0)

def _largest_k(program: Program, dt: DType) -> int:
  """The largest reduction length of the program's WMMAs giving dt (an ERROR_BOUND element is one's result, moved)."""
  return max((u.arg[2] for u in program.uops if u.op is Ops.WMMA and u.dtype.scalar() == dt), default=0)


@dataclass
class _Buffer:
  """One buffer's comparison: reference, backend's values, levels, kind, dtype, and what it found so far."""
  ref: np.ndarray
  got: np.ndarray
  levels: np.ndarray
  kind: Kind
  dt: DType
  good: np.ndarray
  compared: np.ndarray
  rules: dict[str, np.ndarray] = field(default_factory=dict)  # rule name -> the elements it compared

  def check(self, rule: str, where: np.ndarray, ok: np.ndarray) -> None:
    """Elements `where` were compared by `rule`; ok: which elements of the buffer keep it (read only where `where`)."""
    if not where.any(): return
    self.good[where] = ok[where]
    self.compared |= where
    self.rules[rule] = where

def _compare_buffer(program: Program, e: Expected, b: int, x: _Buffer) -> np.ndarray | None:
  """Checks buffer b element by element by its level's rule (the module docstring); UNKNOWN elements by the buffer's
  kind where that states a rule. Returns the alternative values of the allowed-set rule when it was used."""
  lv = x.levels
  x.check("exact", lv <= Certainty.NAN_PAYLOAD, same_value(x.got, x.ref))
  tol = lv == Certainty.TOLERANCE
  if tol.any():
    bound = _largest_bound(program, x.dt)
    x.check(f"tolerance {bound} ulp", tol, within_tolerance(x.got, x.ref, bound))
  unknown = lv == Certainty.UNKNOWN
  bounded = (lv == Certainty.ERROR_BOUND) | (unknown if x.kind[0] == BOUND else False)
  if bounded.any():
    assert e.above is not None, "an ERROR_BOUND element needs the above run"
    known, ok = _within_bound(x.ref, x.got, e.above.buffers[b], bounded & ~e.above.undefined[b], x.dt, _largest_k(program, x.dt))
    x.check("WMMA error bound", known, ok)
  if x.kind[0] == MONO and unknown.any():
    assert e.below is not None and e.above is not None, "a MONO buffer needs both runs"
    known = unknown & ~e.below.undefined[b] & ~e.above.undefined[b]
    inside, ok = _within_bracket(x.ref, x.got, e.below.buffers[b], e.above.buffers[b], known)
    x.check("monotone bracket", inside, ok)
  allowed = (lv == Certainty.ALLOWED_SET) | (unknown if x.kind[0] == SET else False)
  if not allowed.any(): return None
  assert e.below is not None, "an ALLOWED_SET element needs the below run"
  other = e.below.buffers[b]
  x.check("allowed set", allowed, same_value(x.got, x.ref) | same_value(x.got, other))
  return other

def compare(program: Program, e: Expected, got: list[np.ndarray]) -> tuple[Mismatch | None, Tally]:
  """Checks every buffer of a backend's run (`got`) against the emulator's by the rules above; (first mismatch, tally)."""
  tally = Tally()
  first: Mismatch | None = None
  bufs = program.buffers
  for b, (ref, act, levels, kind) in enumerate(zip(e.buffers, got, e.certainty, e.kinds)):
    dt = bufs[b].base
    act = np.asarray(act).view(to_np(dt)) if act.dtype != to_np(dt) else act
    if kind[0] == WILD:
      tally.skipped += ref.size
      continue
    x = _Buffer(ref, act, levels, kind, dt, np.ones(ref.shape, bool), np.zeros(ref.shape, bool))
    alternative = _compare_buffer(program, e, b, x)
    exact = int(np.count_nonzero(levels == Certainty.EXACT))
    tally.exact += exact
    tally.loose += int(np.count_nonzero(x.compared)) - exact
    tally.skipped += int(ref.size - np.count_nonzero(x.compared))
    bad = ~x.good & x.compared
    if first is None and bad.any():
      el = int(np.argmax(bad))
      rule = next(name for name, where in x.rules.items() if where[el])
      first = Mismatch(b, el, rule, dt, ref, act, alternative if rule == "allowed set" else None)
  return first, tally


