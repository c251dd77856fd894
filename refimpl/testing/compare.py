"""Comparing a backend's results with the spec, lane by lane, by each op's rule in refimpl/spec.py.

  exact      bit for bit, with every NaN one value (+0 and -0 differ)
  tolerance  within the op's ULP bound of the reference (refimpl.spec.ulp_bound); where the reference is NaN, ±inf or
             ±0 the result must be exactly that special value (the sign of a zero included)
  allowed    equal (as exact) to one of refimpl.emulator.alu.allowed_results
  undefined  lanes the spec leaves undefined are never compared
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from refimpl import spec
from refimpl.dtype import DType, dtypes, from_np, to_np
from refimpl.emulator import alu
from refimpl.ir import Ops
from refimpl.testing.values import to_bits

CONVERSIONS = (Ops.CAST, Ops.BITCAST)

def same_value(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """Lanes where a and b are the same value: identical bits, or both NaN."""
  equal = to_bits(np.ascontiguousarray(a)) == to_bits(np.ascontiguousarray(b))
  if dtypes.is_float(from_np(a.dtype)):
    with np.errstate(invalid="ignore"): equal |= np.isnan(a.astype(np.float64)) & np.isnan(b.astype(np.float64))
  return equal

def _ordered(x: np.ndarray) -> np.ndarray:
  """Float bits mapped to int64s whose order is the numbers' order (+0 and -0 both map to 0)."""
  bits = to_bits(np.ascontiguousarray(x)).astype(np.uint64)
  sign_bit = np.uint64(1) << np.uint64(8 * x.dtype.itemsize - 1)
  magnitude = (bits & (sign_bit - np.uint64(1))).astype(np.int64)
  return np.where(bits & sign_bit, -magnitude, magnitude)

def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
  """How many representable values of the dtype lie between a and b (0 when equal; ±0 count as one value), as uint64."""
  oa, ob = _ordered(a), _ordered(b)
  same_side = (oa >= 0) == (ob >= 0)  # then oa - ob cannot overflow; across zero the distance is |oa| + |ob|
  with np.errstate(over="ignore"):
    across = np.abs(oa).astype(np.uint64) + np.abs(ob).astype(np.uint64)
    return np.where(same_side, np.abs(oa - ob).astype(np.uint64), across)

def within_tolerance(got: np.ndarray, expected: np.ndarray, bound: int) -> np.ndarray:
  """Lanes of got within `bound` ulps of expected; where expected is NaN, +-inf or +-0, exactly that value (the
  tolerance rule)."""
  wide = expected.astype(np.float64)
  special = ~np.isfinite(wide) | (wide == 0)
  return np.where(special, same_value(got, expected), ulp_distance(got, expected) <= bound)

@dataclass
class Verdict:
  """The lanes of one comparison: which differ from the spec, which were undefined (and so not compared)."""
  expected: np.ndarray
  got: np.ndarray
  bad: np.ndarray
  undefined: np.ndarray
  rule: str
  alternatives: list[np.ndarray] = field(default_factory=list)

  @property
  def ok(self) -> bool: return not self.bad.any()
  @property
  def checked(self) -> int: return int((~self.undefined).sum())

def reference(op: Ops, dtype: DType, inputs: list[np.ndarray], out_dtype: DType | None = None) -> alu.Outcome:
  """The spec's Outcome for one op over flat input lanes (the emulator's own rule)."""
  if op is Ops.CAST: return alu.exec_cast(inputs[0], dtype, out_dtype)
  if op is Ops.BITCAST: return alu.exec_bitcast(inputs[0], dtype, out_dtype)
  return alu.exec_alu(op, dtype, *inputs)

def rule_of(op: Ops, dtype: DType) -> str:
  """"exact", "tolerance" or "allowed" for this op on this operand dtype (CAST and BITCAST are exact)."""
  return "exact" if op in CONVERSIONS else spec.kind(op, dtype)

def compare(op: Ops, dtype: DType, inputs: list[np.ndarray], got: np.ndarray, out_dtype: DType | None = None,
            outcome: alu.Outcome | None = None) -> Verdict:
  """Checks `got` (a backend's result lanes) against the spec for `op` on operand dtype `dtype` and these inputs.
  `outcome`: the spec's reference for these inputs when the caller already has it (reference() is computed otherwise)."""
  if outcome is None: outcome = reference(op, dtype, inputs, out_dtype)
  expected = outcome.values
  undefined = outcome.undefined if outcome.undefined is not None else np.zeros(expected.shape, bool)
  if got.dtype != expected.dtype: raise TypeError(f"{op.name} on {dtype!r}: result is {got.dtype}, expected {expected.dtype}")
  rule = rule_of(op, dtype)
  alternatives: list[np.ndarray] = []
  if rule == "exact": good = same_value(got, expected)
  elif rule == "allowed":
    alternatives = alu.allowed_results(op, dtype, *inputs)
    good = np.zeros(expected.shape, bool)
    for allowed in alternatives: good |= same_value(got, allowed)
  else:
    bound = spec.ulp_bound(op, dtype)
    good = within_tolerance(got, expected, bound)
    rule = f"tolerance {bound} ulp"
  return Verdict(expected, got, ~good & ~undefined, undefined, rule, alternatives)

# *** reproducers ***

def _bits_text(x: np.generic) -> str:
  width = 2 * x.dtype.itemsize
  return f"0x{int(to_bits(np.asarray([x]))[0]):0{width}x}"

def _array_literal(x: np.generic, dtype: DType) -> str:
  if dtype == dtypes.bool: return f"np.array([{bool(x)}])"
  if dtypes.is_int(dtype): return f"np.array([{int(x)}], np.{to_np(dtype).name})"
  return f"from_bits([{_bits_text(x)}], dtypes.{_dtype_attr(dtype)})"

def _dtype_attr(dtype: DType) -> str:
  names = {dtypes.float16: "float16", dtypes.bfloat16: "bfloat16", dtypes.float32: "float32", dtypes.float64: "float64",
           dtypes.fp8e4m3: "fp8e4m3", dtypes.fp8e5m2: "fp8e5m2", dtypes.bool: "bool"}
  return names.get(dtype) or to_np(dtype).name

def operand_dtypes(op: Ops, dtype: DType) -> tuple[DType, ...]:
  """The scalar dtype of each input of the op's elementwise kernel."""
  from refimpl.ir.builder import operand_dtypes as builder_operand_dtypes
  return builder_operand_dtypes(op, dtype)

def reproducer(op: Ops, dtype: DType, inputs: list[np.ndarray], verdict: Verdict, lane: int, device: str,
               out_dtype: DType | None = None) -> str:
  """A report of one bad lane: op, dtypes, the inputs, expected and got (values and bits), and a one-line replay."""
  in_dts = operand_dtypes(op, dtype)
  args = ", ".join(_array_literal(x[lane], dt) for x, dt in zip(inputs, in_dts))
  target = f", dtype=dtypes.{_dtype_attr(out_dtype)}" if out_dtype is not None else ""
  lines = [f"{device}: {op.name} on {dtype!r}{f' -> {out_dtype!r}' if out_dtype else ''} breaks the spec ({verdict.rule})",
           *(f"  input {k}: {x[lane]!r} ({_bits_text(x[lane])})" for k, x in enumerate(inputs)),
           f"  expected: {verdict.expected[lane]!r} ({_bits_text(verdict.expected[lane])})"]
  for k, allowed in enumerate(verdict.alternatives[1:], 1):
    if same_value(allowed[lane:lane + 1], verdict.expected[lane:lane + 1])[0]: continue
    lines.append(f"  or      : {allowed[lane]!r} ({_bits_text(allowed[lane])})  [allowed alternative {k}]")
  lines += [f"  got     : {verdict.got[lane]!r} ({_bits_text(verdict.got[lane])})",
            "  replay  : from refimpl.testing import eval_op; from refimpl.testing.values import from_bits; "
            "from refimpl.ir import Ops; from refimpl.dtype import dtypes; import numpy as np; "
            f"print(eval_op(Ops.{op.name}, {args}{target}, device={device!r}))"]
  return "\n".join(lines)
