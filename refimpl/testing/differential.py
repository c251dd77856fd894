"""Op-level differential checks: one compiled kernel per (device, op, dtype) serves every batch of inputs.

Each harness compiles `out[i] = op(in1[i], ...)` over LANES elements once (refimpl.ir.elementwise) and checks batches of up
to LANES input lanes against the spec (refimpl.testing.compare). Lanes the spec leaves undefined are never sent to the
backend: their inputs are replaced by ones (defined for every op) before the launch and they are not compared, so an
integer division by zero can never trap inside the test process.

`sweep_inputs` gives the inputs of the sweep tests: every value (unary ops and casts on 8- and 16-bit dtypes) or every
pair (binary ops on 8-bit dtypes) where that fits in one launch, else every edge value or pair of edge values
(refimpl.testing.values.edge_values), filled up with random values from a fixed seed."""
from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass

import numpy as np

from refimpl import spec
from refimpl.device import Device
from refimpl.dtype import DType, dtypes, to_np
from refimpl.emulator.alu import Outcome
from refimpl.ir import GroupOp, Ops, elementwise
from refimpl.runner import Kernel
from refimpl.testing.compare import CONVERSIONS, Verdict, compare, operand_dtypes, reference, reproducer
from refimpl.testing.values import edge_values, from_bits, random_values

LANES = 1 << 16  # every 16-bit input, or every pair of 8-bit inputs, in one launch

def _arity(op: Ops) -> int:
  if op in CONVERSIONS or op in GroupOp.Unary: return 1
  return 2 if op in GroupOp.Binary else 3

@dataclass(frozen=True)
class OpCase:
  """One op on one operand dtype (and, for CAST and BITCAST, one target dtype)."""
  op: Ops
  dtype: DType
  out_dtype: DType | None = None

  @property
  def id(self) -> str:
    target = f"-to-{spec.short_name(self.out_dtype)}" if self.out_dtype is not None else ""
    return f"{self.op.name}-{spec.short_name(self.dtype)}{target}"
  @property
  def result_dtype(self) -> DType:
    if self.out_dtype is not None: return self.out_dtype
    return dtypes.bool if self.op in GroupOp.Comparison else self.dtype
  @property
  def input_dtypes(self) -> tuple[DType, ...]: return operand_dtypes(self.op, self.dtype)

def alu_cases() -> list[OpCase]:
  """Every ALU op on every operand dtype the spec defines it for."""
  return [OpCase(op, dt) for op in spec.OP_ORDER if op not in CONVERSIONS for dt in spec.VALUE_DTYPES if spec.accepts(op, dt)]

def cast_cases() -> list[OpCase]:
  """CAST between every ordered pair of distinct value dtypes."""
  return [OpCase(Ops.CAST, s, d) for s, d in itertools.permutations(spec.VALUE_DTYPES, 2)]

def bitcast_cases() -> list[OpCase]:
  """BITCAST between every ordered pair of distinct non-bool dtypes of one size."""
  return [OpCase(Ops.BITCAST, s, d) for s, d in itertools.permutations(spec.VALUE_DTYPES, 2)
          if s.itemsize == d.itemsize and dtypes.bool not in (s, d)]

def supported(device: str, case: OpCase) -> bool:
  return all(Device[device].supports_dtype(dt) for dt in (*case.input_dtypes, case.result_dtype))

def local_size_for(device: str, n: int) -> int:
  """The workgroup size of an n-lane elementwise kernel on `device`: 1 when n workgroups fit its global_max (or it has
  no grid), else the smallest power of two dividing n that makes n // local fit (a WebGPU grid stops at 65535)."""
  renderer = Device[device].renderer
  if renderer.global_max is None or n <= renderer.global_max[0]: return 1
  local = 2
  while n % local == 0 and n // local > renderer.global_max[0]: local *= 2
  return local

class OpHarness:
  """A compiled elementwise kernel of one OpCase on one device, checking input batches against the spec."""
  def __init__(self, device: str, case: OpCase, lanes: int = LANES):
    self.device, self.case, self.lanes = device, case, lanes
    program = elementwise(case.op, case.dtype, n=lanes, out_dtype=case.out_dtype, local_size=local_size_for(device, lanes))
    self.kernel = Kernel(program, device)
    self.examples = 0

  def check(self, inputs: list[np.ndarray], outcome: Outcome | None = None) -> Verdict:
    """Runs the inputs (at most `lanes` each, undefined lanes replaced by ones) and compares every defined lane.
    `outcome`: the spec's reference for these inputs, when the caller computed it once for several backends."""
    n = len(inputs[0])
    if n > self.lanes: raise ValueError(f"{n} lanes do not fit a harness of {self.lanes}")
    if outcome is None: outcome = reference(self.case.op, self.case.dtype, inputs, self.case.out_dtype)
    safe = [np.ones(self.lanes, to_np(dt)) for dt in self.case.input_dtypes]
    for full, x in zip(safe, inputs):
      full[:n] = x
      if outcome.undefined is not None: full[:n][outcome.undefined] = full.dtype.type(1)
    out = np.zeros(self.lanes, to_np(self.case.result_dtype))
    got = self.kernel(out, *safe)[0][:n]
    self.examples += n
    return compare(self.case.op, self.case.dtype, inputs, got, self.case.out_dtype, outcome)

  def failure_report(self, inputs: list[np.ndarray], verdict: Verdict, limit: int = 3) -> str:
    """Reproducers of the first `limit` bad lanes, and how many there were."""
    bad = np.flatnonzero(verdict.bad)
    parts = [reproducer(self.case.op, self.case.dtype, inputs, verdict, int(k), self.device, self.case.out_dtype)
             for k in bad[:limit]]
    return f"{len(bad)} of {verdict.checked} defined lanes differ from the spec\n" + "\n".join(parts)

@functools.cache
def harness(device: str, case: OpCase) -> OpHarness:
  """The one compiled harness per (device, case) of this process."""
  return OpHarness(device, case)

def sweep_inputs(case: OpCase, lanes: int = LANES, seed: int = 0) -> list[np.ndarray]:
  """Inputs covering the case exhaustively where that fits in `lanes`, else edge values (and pairs) plus random ones."""
  dts = case.input_dtypes
  if case.op is Ops.WHERE: dts = dts[1:]
  rng = np.random.default_rng(seed)
  bits = [8 * dt.itemsize for dt in dts]
  if sum(bits) <= 16 and dts[0] != dtypes.bool:
    columns = _every_combination(dts)
  else:
    columns = _edge_combinations(dts, lanes, rng)
    fill = lanes - len(columns[0])
    columns = [np.concatenate([c, random_values(dt, fill, rng)]) for c, dt in zip(columns, dts)]
  if case.op is Ops.WHERE: columns = [rng.integers(0, 2, len(columns[0])).astype(np.bool_), *columns]
  return columns

def _every_combination(dts: tuple[DType, ...]) -> list[np.ndarray]:
  """Every input (unary) or pair of inputs (binary), as bit patterns viewed as the dtypes."""
  grids = np.meshgrid(*(np.arange(1 << (8 * dt.itemsize), dtype=np.uint64) for dt in dts), indexing="ij")
  return [from_bits(g.reshape(-1), dt) for g, dt in zip(grids, dts)]

def _edge_combinations(dts: tuple[DType, ...], lanes: int, rng: np.random.Generator) -> list[np.ndarray]:
  """Every tuple of edge values when they fit in half the lanes, else a random half-lanes sample of them."""
  edges = [edge_values(dt) for dt in dts]
  total = int(np.prod([len(e) for e in edges]))
  if total <= lanes // 2:
    grids = np.meshgrid(*(np.arange(len(e)) for e in edges), indexing="ij")
    picks = [g.reshape(-1) for g in grids]
  else: picks = [rng.integers(0, len(e), lanes // 2) for e in edges]
  return [e[p] for e, p in zip(edges, picks)]
