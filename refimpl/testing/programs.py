"""Helpers for testing a backend with small programs: run one on a device, compare it bit for bit, against a rule or
against the emulator. The backend test files (spec_tests/test_backend_*.py) and the program-level suite share them.

  run / ew            run a program (ew: the elementwise kernel of one op) on a device, get every buffer back
  same_bits           exact comparison: bit for bit, every NaN one value (+0 and -0 differ); assert_same asserts it
  require             skip a test when the device lacks a dtype it needs (a capability, never a device name)
  program_dtypes / device_scalars   the dtypes a program needs; the dtypes random programs for a device may use
  refused             whether a device declines a program as beyond its capabilities (random-program tests skip it)
  ops_kernel          one kernel computing many ops side by side, one output buffer and its inputs per op (ops_arrays)
  check_ops           run ops_kernel on a device; every lane must be an allowed result (assert_allowed, after
                      refimpl.emulator.alu.allowed_results)
  emulation_outcome   everything one emulator run shows that the spec pins, to compare two ways of running a program
                      (lanes or sequential, rules bound per program or not, chunks of the launch or not)
  check_against_emulator / run_against_emulator   a whole program on a device vs the emulator: the elements the
                      emulator pins to one value (EXACT, NAN_PAYLOAD) must be it (NaN as one value); loose and
                      undefined elements are not compared
Rules as small functions: wrap (two's complement wrap-around of a Python int), rne (an exact rational rounded once to
nearest even), mulacc_tie (operands where fused and unfused MULACC differ).
"""
from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest

from refimpl.device import Device
from refimpl.dtype import DType, PtrDType, dtypes, from_np, to_np, truncate
from refimpl.emulator.alu import allowed_results, exec_alu
from refimpl.emulator.certainty import NAN_PAYLOAD, is_one_value
from refimpl.emulator.machine import emulate
from refimpl.errors import UndefinedBehavior
from refimpl.ir import INDEX_DTYPE, GroupOp, Ops, Program, ProgramBuilder, alu_allows, elementwise
from refimpl.ir.strategies import SCALARS
from refimpl.ir.verify import ProgramError
from refimpl.lower import lower_for
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value
from refimpl.testing.differential import OpCase, local_size_for

EXACT_OPS = sorted(GroupOp.ALU - GroupOp.Transcendental, key=lambda o: o.value)  # exact and allowed-set ALU ops

def a(values, dt: DType) -> np.ndarray: return np.array(values, dtype=to_np(dt))

def run(device: str, program: Program, *arrays: np.ndarray, vals: Sequence[int] = ()) -> list[np.ndarray]:
  """Every buffer of `program` after one run on `device`."""
  return Kernel(program, device)(*arrays, vals=vals)

def ew(device: str, op: Ops, dt: DType, *xs, out_dtype: DType | None = None) -> np.ndarray:
  """out[i] = op(xs...[i]) on `device` (dt is the operands' dtype; CAST/BITCAST convert to out_dtype)."""
  xs = [np.asarray(x) for x in xs]
  out = out_dtype or (dtypes.bool if op in GroupOp.Comparison else dt)
  n = len(xs[-1])
  program = elementwise(op, dt, n=n, out_dtype=out_dtype, local_size=local_size_for(device, n))
  return run(device, program, np.zeros(n, to_np(out)), *xs)[0]

def emulation_outcome(program: Program, inputs: Sequence[np.ndarray], vals: Sequence[int] = (), strict: bool = True):
  """What a run of the emulator shows: the bytes of every buffer and of its certainty levels, and every event; or, when
  strict mode stops it, the report (op, uop, lane, operands, reason, count, origin). A NaN of level NAN_PAYLOAD shows as
  one NaN: the spec leaves its payload open (an op whose operands are both NaN keeps either one's)."""
  try:
    e = emulate(program, inputs, vals, strict=strict)
    shown = [_one_nan(x, c).tobytes() for x, c in zip(e.buffers, e.certainty)]
    return shown + [c.tobytes() for c in e.certainty], [str(ev) for ev in e.events]
  except UndefinedBehavior as ex:
    return ("UB", ex.op, ex.uop_index, ex.lane, repr(ex.operands), ex.reason, ex.count, str(ex.origin))

def _one_nan(values: np.ndarray, levels: np.ndarray) -> np.ndarray:
  """values with every NaN whose level is NAN_PAYLOAD replaced by one NaN."""
  if not dtypes.is_float(from_np(values.dtype)): return values
  out = values.copy()
  with np.errstate(invalid="ignore"): out[(levels == NAN_PAYLOAD) & np.isnan(values.astype(np.float64))] = np.nan
  return out

def same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
  """Lanes where got and want are the same value: identical bits, or both NaN. The arrays must be of one dtype."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype, f"comparing {got.dtype} with {want.dtype}"
  return same_value(got, want)

def assert_same(got: np.ndarray, want: np.ndarray, what: str = "") -> None:
  ok = same_bits(got, want)
  bad = np.flatnonzero(~ok)[:5]
  assert ok.all(), f"{what}: {(~ok).sum()} lanes differ, e.g. {[(int(k), got[k], want[k]) for k in bad]}"

def require(device: str, *dts: DType) -> None:
  """Skips the calling test when `device` does not support one of dts (as a GPU without cl_khr_fp64 lacks float64)."""
  missing = [dt.name for dt in dts if not Device[device].supports_dtype(dt)]
  if missing: pytest.skip(f"{device} does not support {', '.join(sorted(set(missing)))}")

def program_dtypes(program: Program) -> set[DType]:
  """Every scalar dtype a program's values and buffers have (what a device must support to run it)."""
  return {u.dtype.base.scalar() if isinstance(u.dtype, PtrDType) else u.dtype.scalar() for u in program.uops} - {dtypes.void}

def device_scalars(device: str) -> tuple[DType, ...]:
  """The scalar dtypes of refimpl.ir.strategies.SCALARS that `device` supports (random programs for it use only these)."""
  return tuple(dt for dt in SCALARS if Device[device].supports_dtype(dt))

def refused(device: str, program: Program) -> bool:
  """Whether `device` declines `program` as beyond its capabilities (refimpl.lower.check_capabilities, the renderer's
  check_program or the device's own dtypes: ProgramError rule "capability"), as the fuzzer sets such programs aside;
  the declined op's own conformance case reports the failure."""
  try: lower_for(program, Device[device])
  except ProgramError as e:
    if e.rule == "capability": return True
    raise
  return False

def wrap(v: int, dt: DType) -> int:
  """The rule for int ADD SUB MUL NEG MULACC and SHL: the value modulo 2^bits, in the dtype's range."""
  lo, bits = int(dtypes.min(dt)), 8 * dt.itemsize
  return (v - lo) % (1 << bits) + lo

def rne(q: Fraction, dt: DType) -> float:
  """An exact rational rounded once to nearest even in dt: float(Fraction) rounds correctly to float64; narrower dtypes
  take values exact in float64 and round them once with refimpl.dtype.truncate."""
  f = float(q)
  if dt == dtypes.float64: return f
  assert Fraction(f) == q, "example must be exact in float64"
  return truncate[dt](f)

def mulacc_tie(dt: DType) -> tuple[float, float, float, float, float]:
  """(a, b, c, fused, unfused): a*b = 1 + 2^-k1 + 2^-k2 + 2^-p is a tie at precision p, so rounding the product first (to
  even) makes a*b + c = 0, while the fused result is 2^-p."""
  p = dtypes.finfo(dt)[1] + 1
  k1, k2 = p // 2, p - p // 2
  av, bv = 1 + Fraction(1, 2**k1), 1 + Fraction(1, 2**k2)
  cv = -(1 + Fraction(1, 2**k1) + Fraction(1, 2**k2))
  fused, unfused = rne(av * bv + cv, dt), rne(Fraction(rne(av * bv, dt)) + cv, dt)
  assert fused != unfused
  return float(av), float(bv), float(cv), fused, unfused

def exact_ops(dt: DType) -> list[Ops]:
  """The exact and allowed-set ALU ops the spec defines on dt (EXP2/LOG2/SIN, tolerance ops, excluded)."""
  return [op for op in EXACT_OPS if alu_allows(op, dt)]

def defined_inputs(op: Ops, dt: DType, xs: list[np.ndarray]) -> list[np.ndarray]:
  """xs with every lane the spec leaves undefined (the emulator's ALU says which) replaced by ones (defined for every op)."""
  o = exec_alu(op, dt, *xs)
  if o.undefined is None: return xs
  return [np.where(o.undefined, x.dtype.type(1), x) for x in xs]

def ops_kernel(name: str, cases: Sequence[OpCase], n: int, builder: ProgramBuilder | None = None, local_size: int = 1) -> Program:
  """One kernel computing out_j[i] = op_j(ins_j[i]) for every case; the buffers are, per case, its output then its
  inputs. CAST/BITCAST convert their input to the case's out dtype. `builder` may already hold other uops. One thread
  per lane, in workgroups of `local_size` (as refimpl.ir.elementwise; local_size_for(device, n) fits a device's grid)."""
  b = builder or ProgramBuilder(name)
  bufs = [(b.global_buf(c.result_dtype, n), [b.global_buf(d, n) for d in c.input_dtypes]) for c in cases]
  i = b.gidx(0, n // local_size)
  if local_size > 1: i = b.alu(Ops.ADD, b.alu(Ops.MUL, i, b.const(local_size, INDEX_DTYPE)), b.lidx(0, local_size))
  for c, (o, ib) in zip(cases, bufs):
    xs = tuple(b.load(x, i) for x in ib)
    b.store(o, i, b.uop(c.op, c.result_dtype, xs) if c.op in (Ops.CAST, Ops.BITCAST) else b.alu(c.op, *xs))
  return b.build()

def ops_arrays(dt: DType, ops: Sequence[Ops], inputs: dict, n: int) -> list[np.ndarray]:
  """The buffers of ops_kernel over [OpCase(op, dt) for op in ops]: per op a zeroed output, then its `inputs[op]`."""
  arrays = []
  for op in ops: arrays += [np.zeros(n, to_np(OpCase(op, dt).result_dtype)), *inputs[op]]
  return arrays

def assert_allowed(results: list[np.ndarray], dt: DType, ops: Sequence[Ops], inputs: dict, what: str = "") -> None:
  """results (the buffers of ops_kernel after a run) hold, for each op, only allowed results of its inputs."""
  at = 0
  for op in ops:
    got, xs = results[at], inputs[op]
    at += 1 + len(xs)
    ok = np.zeros(len(got), bool)
    for want in allowed_results(op, dt, *xs): ok |= same_bits(got, want)
    bad = np.flatnonzero(~ok)[:3]
    assert ok.all(), f"{what} {op.name} {dt.name}: {(~ok).sum()} lanes, e.g. {[[x[k] for x in xs] for k in bad]} -> {got[bad]}"

def check_ops(device: str, dt: DType, ops: Sequence[Ops], inputs: dict, n: int) -> None:
  """Runs every op of `ops` on dtype dt over its `inputs[op]` (n lanes, defined) in one kernel; each result lane must be
  an allowed result (exact ops: the one result, bit for bit)."""
  program = ops_kernel(f"ops_{dt.name.replace(' ', '_')}_{n}", [OpCase(op, dt) for op in ops], n,
                       local_size=local_size_for(device, n))
  assert_allowed(run(device, program, *ops_arrays(dt, ops, inputs, n)), dt, ops, inputs, device)

def run_against_emulator(device: str, program: Program, inputs: Sequence[np.ndarray], vals: Sequence[int] = (),
                         strict: bool = True) -> tuple[list[np.ndarray], int]:
  """Runs `program` on the emulator (strict or permissive) and on `device`; asserts that every element the emulator pins
  to one value (certainty EXACT or NAN_PAYLOAD) is that value: the same bits, or a NaN for a NaN. Returns the device's
  buffers and how many elements were compared."""
  ref = emulate(program, inputs, vals=vals, strict=strict)
  kernel = Kernel(program, device)
  got = kernel(*[x.copy() for x in inputs], vals=vals)
  compared = 0
  for k, (want, have, levels) in enumerate(zip(ref.buffers, got, ref.certainty)):
    exact = is_one_value(levels)
    bad = np.flatnonzero(exact & ~same_value(have, want))
    assert len(bad) == 0, (f"{device} {program.name}: buffer {k} element {bad[0]}: emulator {want[bad[0]]!r}, "
                           f"{device} {have[bad[0]]!r} ({len(bad)} elements differ)\n{program}")
    compared += int(exact.sum())
  return got, compared

def check_against_emulator(device: str, program: Program, inputs: Sequence[np.ndarray], vals: Sequence[int] = (),
                           strict: bool = True) -> int:
  """run_against_emulator's count of compared elements."""
  return run_against_emulator(device, program, inputs, vals, strict)[1]
