"""The ops that compute values: constants, thread ids and vars, registers (DEFINE_ACC, ASSIGN), ALU ops, WHERE, CAST and
BITCAST, VECTORIZE, GEP and WMMA. Each handler is alu's rule for its op with the certainty rule around it (values.py);
an op with an exact path (Plan.exact) runs it first (`run_exact`) and its rule with levels only where an operand has
levels. Undefined results are reported (a deferred kind: recorded until used) as state.py's "Undefined behaviour" says.

WMMA rule: see `_wmma` (every WMMA result element is loose, within an error bound).
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.certainty import EXACT, LEVEL, Certainty, carry_bits, join, of_loose, where_undefined
from refimpl.emulator.plan import Kind
from refimpl.emulator.state import Handler, Machine
from refimpl.emulator.ub import UB
from refimpl.emulator.values import (
  LAZY,
  Value,
  all_settled,
  carried_levels,
  chosen_levels,
  inherited_levels,
  lanewise,
  on_lane,
  per_lane,
  stacked,
  with_levels,
)
from refimpl.ir import GroupOp, Ops, UOp


def run_exact(m: Machine, i: int) -> bool:
  """Uop i's exact path (Plan.exact) where its operands are exact: sets its value and returns True; False (nothing
  done) where an operand has levels. straight.exact_step is the same path as a step of a stretch."""
  operands, rule, result = m.plan.exact[i]
  if len(operands) == 1:
    x = m.value_of(operands[0])
    if x.cert is not None: return False
    m.env[i] = result(rule(x.v))
    return True
  if len(operands) == 2:
    x, y = m.value_of(operands[0]), m.value_of(operands[1])
    if x.cert is not None or y.cert is not None: return False
    m.env[i] = result(rule(x.v, y.v))
    return True
  xs = [m.value_of(j) for j in operands]
  for x in xs:
    if x.cert is not None: return False
  m.env[i] = result(rule(*[x.v for x in xs]))
  return True


# ***** values known before the run *****

def _lazy(m: Machine, i: int, u: UOp) -> None:
  """An int value with an affine form (indexing.py): computed when first read (Machine.value_of)."""
  m.env[i] = LAZY

def _define_var(m: Machine, i: int, u: UOp) -> None:
  """DEFINE_VAR: the launch's value of the var (checked against its bounds before the run), on every lane."""
  m.env[i] = LAZY

def _special(m: Machine, i: int, u: UOp) -> None:
  """SPECIAL: the lane's thread id: gidx<d> its workgroup's position and lidx<d> its position in the workgroup along
  dimension d, exact."""
  m.env[i] = LAZY

def _const(m: Machine, i: int, u: UOp) -> None:
  """CONST: the value on every lane, EXACT, except a float NaN, whose payload the IR does not carry (NAN_PAYLOAD)."""
  m.env[i] = m.plan.constants[i]


# ***** registers *****

def _define_acc(m: Machine, i: int, u: UOp) -> None:
  """DEFINE_ACC: a register per lane, holding the initial value (with its levels)."""
  m.env[i] = m.value_of(u.src[0])

def _assign(m: Machine, i: int, u: UOp) -> None:
  """ASSIGN: the register takes the value (with its levels) on active lanes and keeps its own elsewhere; the ASSIGN
  reads as the register. Under uncertain control the register joins the control level on those lanes."""
  set_register(m, u.src[0], m.value_of(u.src[1]))

def set_register(m: Machine, acc: int, new: Value) -> None:
  """ASSIGN's rule: register `acc` takes `new` on the lanes that really run, joined with the control level."""
  real = m.control.real
  if real is None and m.control.level is None:
    m.env[acc] = new
    return
  old, act = m.env[acc], np.ones(1, bool) if real is None else real
  v = np.where(lanewise(act, new.v.ndim), new.v, old.v)
  ctl = m.uncertain(None)
  cert = chosen_levels(lanewise(act, v.ndim), new.cert, old.cert)
  m.env[acc] = with_levels(v, join(cert, None if ctl is None else lanewise(ctl, v.ndim)))


# ***** ALU ops, WHERE, conversions *****

def _settle(m: Machine, i: int, xs: list[Value], out: Any, carried: np.ndarray | None, settled: bool = True) -> None:
  """Stores an alu Outcome as uop i's value, with its levels joined with the operands' `carried` ones (`settled`: they
  hold no middle level, as carried levels never do), after reporting the active lanes it leaves undefined (UNDEFINED
  only there: inactive lanes compute harmless garbage)."""
  if out.undefined is None and out.loose is None and carried is None:  # every element EXACT
    m.env[i] = Value(out.values)
    return
  own = of_loose(out.values, out.loose, out.looseness)
  if out.undefined is not None:
    real = m.control.real
    bad = out.undefined if real is None else out.undefined & lanewise(real, out.undefined.ndim)
    lanes = np.flatnonzero(np.broadcast_to(per_lane(bad), (m.control.grid.lanes,)))
    def describe(k: int) -> tuple:
      return (*_why(m, i, xs, int(lanes[k]), out), tuple(on_lane(x.v, lanes[k]) for x in xs))
    if out.kind.deferred: m.defer(i, lanes, describe)
    else: m.ub(i, "alu", lanes, describe)
    own = where_undefined(own, bad)
  own_settled = out.loose is None or out.looseness is Certainty.NAN_PAYLOAD
  m.env[i] = with_levels(out.values, join(own, carried), settled and own_settled)

def _why(m: Machine, i: int, xs: list[Value], lane: int, out: Any) -> tuple[UB, str]:
  """(kind, reason) of uop i's undefined behaviour on `lane`: its rule run again on that lane's operands (an Outcome's
  kind and reason are its first undefined element's, which need not be the lane reported)."""
  u, ops = m.plan.uops[i], [x.v[lane:lane + 1] if x.v.shape[0] > 1 else x.v for x in xs]
  src = m.plan.uops[u.src[-1]].dtype.scalar()
  if u.op is Ops.CAST: again = alu.exec_cast(ops[0], src, u.dtype.scalar())
  elif u.op is Ops.BITCAST: again = alu.exec_bitcast(ops[0], src, u.dtype.scalar())
  elif u.op in GroupOp.ALU: again = alu.exec_alu(u.op, src, *ops)
  else: again = out
  return again.kind, again.reason

def _alu(m: Machine, i: int, u: UOp) -> None:
  """ALU ops: alu's rule for the op on the operands' scalar dtype, element by element; an element's level is the join
  of the rule's and the carried levels of the operand elements it is computed from."""
  xs = [m.value_of(j) for j in u.src]
  out = alu.run_alu(u.op, m.plan.operand_dtype[i], *[x.v for x in xs])
  _settle(m, i, xs, out, inherited_levels(xs))

def _ufunc_alu(m: Machine, i: int, u: UOp) -> None:
  """An ALU op whose rule is one numpy ufunc (alu.ufunc_rule), on exact operands: that ufunc, and NAN_PAYLOAD on the
  NaNs it returns, as `_alu` would give them (not looked for where no op reads them: Plan.levels_unread); operands with
  levels go through `_alu`."""
  if not run_exact(m, i): _alu(m, i, u)

def _constant_alu(m: Machine, i: int, u: UOp) -> None:
  """IDIV, MOD, SHL or SHR by a constant with which its rule is defined on every lane (alu.constant_rule): that rule of
  the exact first operand; an operand with levels goes through `_alu`."""
  if not run_exact(m, i): _alu(m, i, u)

def _where(m: Machine, i: int, u: UOp) -> None:
  """WHERE: alu's rule; an element's level is the chosen value's, joined with the condition's carried level."""
  if run_exact(m, i): return
  c, a, b = m.value_of(u.src[0]), m.value_of(u.src[1]), m.value_of(u.src[2])
  out = alu.run_alu(u.op, m.plan.operand_dtype[i], c.v, a.v, b.v)
  chosen = chosen_levels(c.v, a.cert, b.cert)  # moved, not carried
  if chosen is not None and not chosen.any(): chosen = None  # every lane chose an exact value (not a NaN constant's)
  _settle(m, i, [c, a, b], out, join(carried_levels(c), chosen), all_settled([a, b]))

def _convert(m: Machine, i: int, u: UOp) -> None:
  """CAST / BITCAST: alu's rule from the source's scalar dtype to the result's, element by element; levels as ALU
  ops', except that BITCAST, which shows a NaN's payload, carries a NAN_PAYLOAD operand as UNKNOWN (carry_bits)."""
  if i in m.plan.exact and run_exact(m, i): return  # alu.conversion_rule on an exact operand
  x = m.value_of(u.src[0])
  carried = carry_bits(x.cert) if u.op is Ops.BITCAST else carried_levels(x)
  _settle(m, i, [x], alu.run_conversion(u.op, x.v, m.plan.operand_dtype[i], u.dtype.scalar()), carried)


# ***** vectors *****

def _vectorize(m: Machine, i: int, u: UOp) -> None:
  """VECTORIZE: the vector of its scalar operands, element k the k-th operand (with its level)."""
  if run_exact(m, i): return
  xs = [m.value_of(j) for j in u.src]
  values = stacked([x.v for x in xs])
  m.env[i] = Value(values, stacked([EXACT if x.cert is None else x.cert for x in xs], LEVEL, len(values)), all_settled(xs))

def _gep(m: Machine, i: int, u: UOp) -> None:
  """GEP: the elements `arg` of a vector (with their levels): a scalar for one, else a vector in that order."""
  if run_exact(m, i): return
  x, sel = m.value_of(u.src[0]), list(u.arg) if len(u.arg) > 1 else u.arg[0]
  m.env[i] = Value(np.ascontiguousarray(x.v[:, sel]), np.ascontiguousarray(x.cert[:, sel]), x.settled)

def _wmma(m: Machine, i: int, u: UOp) -> None:
  """WMMA: per thread, d[m][n] = c[m][n] + sum_k a[m][k] * b[k][n], every product and sum in float64 in the order c,
  k = 0, 1, ..., K-1, then one rounding to the result dtype (alu's CAST); undefined where an element of a's row, b's
  column or c is. Products of inputs up to float32 are exact in float64, so for float16 / bfloat16 inputs and small K
  the result is the exactly rounded one. Hardware accumulates in other orders and precisions, so every element is
  ERROR_BOUND (a NaN: NAN_PAYLOAD; every order gives NaN there), joined with the carried levels of a's row, b's
  column and c, within an error bound: any order of the K additions, each rounded (to nearest or toward zero) in a
  precision at least the result dtype's, products exact or rounded likewise, gives
  |d - exact| <= gamma(K + 1) * S + (2K + 1) * tau, where S = |c| + sum_k |a_k * b_k|, gamma(n) = n eps / (1 - n eps),
  eps is the result dtype's machine epsilon and tau its smallest subnormal (`wmma_error_bound`; unbounded when
  (K + 1) eps >= 1)."""
  N, M, K = u.arg
  a, b, c = (m.value_of(j) for j in u.src)
  A, B = a.v.astype(np.float64).reshape(-1, M, K), b.v.astype(np.float64).reshape(-1, K, N)
  acc = c.v.astype(np.float64).reshape(-1, M, N)
  with np.errstate(all="ignore"):  # inf * 0 and inf - inf are NaN, as the rule says
    for k in range(K): acc = acc + A[:, :, k:k + 1] * B[:, k:k + 1, :]
  shape = (-1, M * N) if u.dtype.count > 1 else (-1,)  # an M*N == 1 result is a scalar: one value per lane
  out = alu.exec_cast(acc.reshape(shape), dtypes.float64, u.dtype.scalar())
  carried = None
  if a.cert is not None or b.cert is not None or c.cert is not None:
    rows = np.zeros((1, M, 1), LEVEL) if a.cert is None else carried_levels(a).reshape(-1, M, K).max(axis=2)[:, :, None]
    cols = np.zeros((1, 1, N), LEVEL) if b.cert is None else carried_levels(b).reshape(-1, K, N).max(axis=1)[:, None, :]
    cu = np.zeros((1, M, N), LEVEL) if c.cert is None else carried_levels(c).reshape(-1, M, N)
    carried = join(rows, cols, cu).reshape(shape)
  bounded = replace(out, loose=np.ones(out.values.shape, dtype=bool), looseness=Certainty.ERROR_BOUND)
  _settle(m, i, [a, b, c], bounded, carried)

def wmma_error_bound(dt, k: int, magnitude: np.ndarray) -> np.ndarray:
  """The WMMA rule's error bound (see `_wmma`) for result dtype dt, reduction length k and S = `magnitude`."""
  e, m = dtypes.finfo(dt)
  eps, tau = 2.0 ** -m, 2.0 ** (2 - 2 ** (e - 1) - m)
  n = k + 1
  gamma = n * eps / (1 - n * eps) if n * eps < 1 else np.inf  # the bound of n rounded steps
  return gamma * np.asarray(magnitude, np.float64) + (2 * k + 1) * tau


HANDLERS: dict[Kind, Handler] = {
  Kind.LAZY: _lazy, Kind.DEFINE_VAR: _define_var, Kind.SPECIAL: _special, Kind.CONST: _const,
  Kind.DEFINE_ACC: _define_acc, Kind.ASSIGN: _assign,
  Kind.ALU: _alu, Kind.UFUNC_ALU: _ufunc_alu, Kind.CONSTANT_ALU: _constant_alu, Kind.WHERE: _where, Kind.CONVERT: _convert,
  Kind.VECTORIZE: _vectorize, Kind.GEP: _gep, Kind.WMMA: _wmma}
