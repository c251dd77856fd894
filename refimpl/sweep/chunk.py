"""One chunk of a sweep, the worker side: the spec's reference computed once, then every backend checked against it.

`run_chunk` returns {"reference_s", "wall_s", "backends": {name: record}}. A backend's record:
  status      pass (every defined lane agrees with the spec), fail, unsupported (a dtype the device lacks), unavailable
              (the device does not open here: not kept, a rerun tries again) or error (the kernel does not render, compile or run)
  rule        the comparison rule (refimpl.testing.compare): "exact", "tolerance N ulp" or "allowed"
  checked     the inputs compared: the chunk's lanes the spec defines (undefined lanes are never run or compared)
  max_error   float results: the largest ulp distance (compare.ulp_distance, in the result dtype) between got and the
              spec's reference over the compared lanes where neither is NaN (0 when every lane matches bit for bit);
              integer and bool results: the largest |got - expected|. A NaN where a number was expected (or the other
              way round) is a violation but has no distance.
  violations  how many compared lanes break the rule; `first` lists the first few: input, expected and got (bits, value)
  seconds     the backend's time on the chunk (launch and comparison)
"""
from __future__ import annotations

import functools
import time
from collections.abc import Callable

import numpy as np

from refimpl.device import Device, DeviceError
from refimpl.dtype import DType, dtypes
from refimpl.fuzz.execute import BackendRef
from refimpl.sweep.plan import CASES
from refimpl.testing.compare import Verdict, reference, same_value, ulp_distance
from refimpl.testing.differential import OpCase, OpHarness, supported
from refimpl.testing.values import from_bits, to_bits

FIRST = 5  # violating inputs kept per chunk and backend
UNAVAILABLE = "unavailable"  # the one status a rerun does not keep: the device may open next time

def chunk_inputs(start: int, count: int) -> list[np.ndarray]:
  """The float32 values whose bit patterns are start .. start+count-1."""
  return [from_bits(np.arange(start, start + count, dtype=np.uint64), dtypes.float32)]

@functools.cache
def _harness(backend: str, case: OpCase, lanes: int) -> OpHarness:
  return OpHarness(backend, case, lanes)

def _ordered_int(x: np.ndarray) -> np.ndarray:
  """Integer (or bool) lanes as uint64s in the same order, so differences are exact."""
  if x.dtype.kind == "i": return x.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63)
  return x.astype(np.uint64)

def max_error(verdict: Verdict, result: DType) -> int:
  """The record's max_error (module docstring) over the verdict's compared lanes (only lanes that differ can add)."""
  differ = ~verdict.undefined & ~same_value(verdict.got, verdict.expected)
  got, expected = verdict.got[differ], verdict.expected[differ]
  if dtypes.is_float(result):
    with np.errstate(invalid="ignore"):
      keep = ~np.isnan(got.astype(np.float64)) & ~np.isnan(expected.astype(np.float64))
    return int(ulp_distance(got[keep], expected[keep]).max(initial=0))
  a, b = _ordered_int(got), _ordered_int(expected)
  return int(np.where(a >= b, a - b, b - a).max(initial=0))

def _lane(x: np.ndarray, k: int) -> dict:
  return {"bits": f"0x{int(to_bits(x[k:k + 1])[0]):0{2 * x.dtype.itemsize}x}", "value": repr(x[k].item())}

def record(case: OpCase, inputs: list[np.ndarray], verdict: Verdict) -> dict:
  """A backend's record of one chunk from its verdict (the module docstring)."""
  bad = np.flatnonzero(verdict.bad)
  first = [{"input": _lane(inputs[0], int(k)), "expected": _lane(verdict.expected, int(k)), "got": _lane(verdict.got, int(k))}
           for k in bad[:FIRST]]
  return {"status": "pass" if verdict.ok else "fail", "rule": verdict.rule, "checked": verdict.checked,
          "max_error": max_error(verdict, case.result_dtype), "violations": len(bad), "first": first}

def check_backend(ref: BackendRef, case: OpCase, inputs: list[np.ndarray], outcome) -> dict:
  """One backend's record of a chunk whose reference (`outcome`) is already computed."""
  t0 = time.perf_counter()
  try: ref.open()
  except DeviceError as e: return {"status": UNAVAILABLE, "detail": str(e), "seconds": 0.0}
  try:
    if not supported(ref.name, case): out = {"status": "unsupported", "detail": f"{ref.name} does not support {case.id}"}
    else:
      out = record(case, inputs, _harness(ref.name, case, len(inputs[0])).check(inputs, outcome))
      if out["status"] == "fail" and case.op in Device[ref.name].renderer.inexact_ops: out["declared_inexact"] = True
  except Exception as e: out = {"status": "error", "detail": f"{type(e).__name__}: {e}"}
  return {**out, "seconds": round(time.perf_counter() - t0, 4)}

def _times(t0: float, reference_s: float) -> dict:
  return {"reference_s": round(reference_s, 4), "wall_s": round(time.perf_counter() - t0, 4)}

def run_chunk(case_id: str, start: int, count: int, backends: tuple[tuple[str, str | None], ...],
              checking: Callable[[str], None] | None = None, checked: Callable[[str, dict], None] | None = None) -> dict:
  """The chunk's result: its time, the reference's and one record per backend ((name, module:Class or None) pairs).
  A worker (refimpl.sweep.schedule) hears of each backend: `checking(name)` before its check, `checked(name, result)`
  after it, with the chunk's result so far holding that backend's record alone."""
  t0 = time.perf_counter()
  case = CASES[case_id]
  inputs = chunk_inputs(start, count)
  outcome = reference(case.op, case.dtype, inputs, case.out_dtype)
  reference_s = time.perf_counter() - t0
  records = {}
  for name, spec in backends:
    if checking is not None: checking(name)
    records[name] = check_backend(BackendRef(name, spec), case, inputs, outcome)
    if checked is not None: checked(name, {**_times(t0, reference_s), "backends": {name: records[name]}})
  return {**_times(t0, reference_s), "backends": records}
