"""Each uop's value on every lane and its certainty levels, and the algebra of those levels that every op shares.

Values. A value is an array with one row per lane, (lanes,) for a scalar dtype and (lanes, n) for T.vec(n); a value
that is the same on every lane may keep a single row (1,) and broadcasts. Beside it: a *certainty* level per element
(refimpl/emulator/certainty.py; an array of that shape, or None = all EXACT). ALU, CAST and BITCAST semantics are
refimpl.emulator.alu's; WHERE's value dtype and the compared dtype are what alu gets as `dtype`.

Certainty rule. An element's level is the join of the level the op that made it gives it (alu's Outcome.certainty:
NAN_PAYLOAD for a NaN, TOLERANCE / ALLOWED_SET for the rule's other loose results; ERROR_BOUND for a WMMA result, see
`_wmma`) and of the carried level (certainty.carry; BITCAST: carry_bits) of every operand element it was computed
from. WHERE's result (and a gated LOAD's choice between memory and its alternative) keeps the level of the value it
chooses, joined with the condition's carried level. A float CONST that is NaN is NAN_PAYLOAD (the IR carries no NaN
payload, so neither its JSON form nor a backend promises one). Memory keeps a level per element: a STORE writes the
value's levels, a LOAD reads them; a LOAD or STORE whose index is uncertain on a lane touched an uncertain element, so
that lane's loaded value / stored element joins the index's carried level. Everything else (other constants, thread
ids, loop counters, loads of exact memory, integer arithmetic on exact values) is EXACT. An element is *loose* when
its level is neither EXACT nor UNDEFINED. Comparing two runs: exact elements bit for bit; loose ones by their level's
rule (refimpl.testing, refimpl.fuzz.expect).

An op's *exact path* is what it computes where every operand is exact: `ExactPath`, chosen once per op by the plan
(plan.Plan.exact) and run by the op's handler and its straight-line step alike (compute.run_exact, straight.exact_step).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from refimpl.emulator.certainty import EXACT, LEVEL, carry, join
from refimpl.emulator.memory import Memory


class Value(NamedTuple):
  """One uop's value on every lane, and its certainty levels (see "Values"): they have the values' shape or broadcast
  to it; None = all EXACT. settled: the levels hold no TOLERANCE, ERROR_BOUND or ALLOWED_SET, so they carry as
  themselves (False: not known; carry them)."""
  v: np.ndarray
  cert: np.ndarray | None = None
  settled: bool = False

class Ref(NamedTuple):
  """An INDEX: the memory and the uop that holds the index (located when a LOAD/STORE knows its width and gate)."""
  mem: Memory
  idx: int

LAZY = object()  # the env entry of an affine value that has not been needed yet

class ExactPath(NamedTuple):
  """What an op computes where its operands are exact: result(rule(*their arrays)), the operands being `operands`."""
  operands: tuple[int, ...]
  rule: Callable[..., np.ndarray]
  result: Callable[[np.ndarray], Value]


# ***** levels *****

def either(*masks: np.ndarray | None) -> np.ndarray | None:
  """The union of optional masks (None: no lane)."""
  if len(masks) == 2 and masks[0] is None: return masks[1]
  out = None
  for x in masks:
    if x is not None: out = x if out is None else out | x
  return out

def lanewise(mask: np.ndarray, ndim: int) -> np.ndarray:
  """A per-lane mask shaped to broadcast against an array of `ndim` dims (a vector value's lanes are rows)."""
  return mask.reshape(mask.shape + (1,) * (ndim - mask.ndim))

def per_lane(mask: np.ndarray) -> np.ndarray:
  """An element mask as a lane mask: a lane is set where any of its elements is."""
  return mask if mask.ndim == 1 else mask.any(axis=-1)

def chosen_levels(cond: np.ndarray, a: np.ndarray | None, b: np.ndarray | None) -> np.ndarray | None:
  """The levels of a select: a's where cond, else b's."""
  if a is None and b is None: return None
  return np.where(cond, EXACT if a is None else a, EXACT if b is None else b)

def with_levels(v: np.ndarray, cert: np.ndarray | None = None, settled: bool = False) -> Value:
  """A Value whose levels have the values' shape: per-lane levels widen a uniform value to every lane."""
  if cert is None: return Value(v)
  if cert.shape == v.shape: return Value(v, cert, settled)
  if cert.shape[0] > v.shape[0]: v = np.broadcast_to(v, (cert.shape[0],) + v.shape[1:])
  return Value(v, np.broadcast_to(lanewise(cert, v.ndim), (cert.shape[0],) + v.shape[1:]), settled)

def carried_levels(x: Value) -> np.ndarray | None:
  """x's levels carried through a computation (certainty.carry)."""
  return x.cert if x.settled or x.cert is None else carry(x.cert)

def inherited_levels(xs: Sequence[Value]) -> np.ndarray | None:
  """The join of the operands' carried levels: what an op computed from them is at least."""
  out = None
  for x in xs:
    if x.cert is not None: out = join(out, carried_levels(x))
  return out

def all_settled(xs: Sequence[Value]) -> bool:
  """Whether every one of xs carries its levels as they are (Value.settled, or all EXACT)."""
  return all(x.settled or x.cert is None for x in xs)


# ***** results of exact operands *****

def ufunc_value(v: np.ndarray) -> Value:
  """The value of a ufunc rule on exact operands: exact, except NAN_PAYLOAD on the NaNs it returns."""
  if v.dtype.kind != "f" or v.size == 0: return Value(v)
  return scalar_float_value(v) if v.ndim == 1 else _float_value(v, np.maximum.reduce(v, axis=None))

def scalar_float_value(v: np.ndarray) -> Value:
  """ufunc_value of a float array of one dimension (a scalar dtype's lanes). Its sum of squares is NaN exactly when an
  element is (IEEE: NaN propagates, and sums of non-negative terms never meet inf - inf): dot is the cheapest numpy
  call that computes it."""
  return _float_value(v, v.dot(v))

def _float_value(v: np.ndarray, total: Any) -> Value:
  """v exact, except NAN_PAYLOAD on its NaNs, where `total` (a reduction of v that propagates NaN) says it has any."""
  return Value(v) if total == total else Value(v, np.isnan(v).view(LEVEL), True)

def stacked(arrays: Sequence[Any], dtype: Any = None, lanes: int = 0) -> np.ndarray:
  """Per-lane arrays (or one element for every lane) as one (lanes, len(arrays)) array: element k of a row is array k's
  (lanes: at least this many rows)."""
  n = max([lanes] + [a.shape[0] for a in arrays if isinstance(a, np.ndarray)])
  out = np.empty((n, len(arrays)), arrays[0].dtype if dtype is None else dtype)
  for k, a in enumerate(arrays): out[:, k] = a
  return out


# ***** for reports *****

def as_python(x: Any) -> Any:
  """A numpy element (or vector row) as a plain Python value."""
  if isinstance(x, np.ndarray): return tuple(as_python(y) for y in x)
  kind = np.dtype(type(x)).kind if isinstance(x, np.generic) else ""
  return bool(x) if kind == "b" else int(x) if kind in "iu" else float(x)

def on_lane(arr: np.ndarray, lane: int) -> Any:
  """A value's element (or vector row) on `lane`, as a plain Python value."""
  return as_python(arr[lane if arr.shape[0] > 1 else 0])
