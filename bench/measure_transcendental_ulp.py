"""The worst ULP error of the EXP2/LOG2/SIN decomposition (refimpl/lower/transcendental.py), per op x dtype.

  python bench/measure_transcendental_ulp.py [--samples N] [--decimal N] [--seed S] [--device NAME]

float16 and bfloat16: every input. float32: N uniform bit patterns, N values from the op's interesting range, N more
from a wider one, every edge value (zeros, infinities, NaNs, extremes, powers of two and their neighbours) and the
hardest SIN reductions. float64: the same with the long double reference, plus a `decimal`-referenced subsample.
The error is |result - exact| / ulp(exact) in ulps of the dtype (`ulp_errors`); specials must be exact (else: inf).
Programs run on the emulator (strict), or on a backend with --device (e.g. CLANG: one compile per op x dtype x size).
The input sets are the spec suite's (spec_tests/test_lower_transcendental.py), larger.
"""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import time

import numpy as np

from refimpl.dtype import DType, dtypes, to_np
from refimpl.ir import Ops, elementwise
from refimpl.lower.transcendental import decompose_transcendentals
from refimpl.spec import ULP_BOUNDS
from refimpl.testing.ulp import ulp_errors

ROOT = pathlib.Path(__file__).resolve().parent.parent
OPS = (Ops.EXP2, Ops.LOG2, Ops.SIN)
DTYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
NAMES = {dtypes.float16: "float16", dtypes.bfloat16: "bfloat16", dtypes.float32: "float32", dtypes.float64: "float64"}

def _suite():
  """The spec suite's module for this pass (its input sets and how it runs a program), loaded from its file."""
  path = ROOT / "spec_tests" / "test_lower_transcendental.py"
  spec = importlib.util.spec_from_file_location("test_lower_transcendental", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod

def run_decomposed(op: Ops, dt: DType, x: np.ndarray, device: str | None) -> np.ndarray:
  program = decompose_transcendentals(elementwise(op, dt, n=x.size))
  out = np.zeros(x.size, to_np(dt))
  if device is None: return suite.run(program, [out, x])[0]
  from refimpl.runner import Kernel
  return Kernel(program, device)(out, x)[0]

def inputs(op: Ops, dt: DType, n: int, seed: int) -> tuple[np.ndarray, str]:
  if dt.itemsize == 2: return suite.every_value(dt), "all"
  x = np.concatenate([suite.sample(op, dt, n, seed), suite.sample(op, dt, n, seed + 1)[::-1]])
  return x, f"{x.size}"

def measure(op: Ops, dt: DType, x: np.ndarray, device: str | None, exact: bool = False) -> tuple[float, float, float, float]:
  got = run_decomposed(op, dt, x, device)
  err = ulp_errors(op, dt, x, got, exact=exact)
  i = int(np.argmax(err))
  return float(err[i]), float(x[i]), float(got[i]), float(np.mean(err[np.isfinite(err)] > 0.5))

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[1])
  ap.add_argument("--samples", type=int, default=200_000, help="float32/float64 samples per set (default 200000)")
  ap.add_argument("--decimal", type=int, default=5_000, help="float64 samples checked against decimal (default 5000)")
  ap.add_argument("--seed", type=int, default=0)
  ap.add_argument("--device", default=None, help="run on this device (default: the spec suite's emulator path)")
  args = ap.parse_args()
  rows = []
  print(f"{'op':5} {'dtype':9} {'inputs':>8} {'worst ulp':>9} {'> 0.5':>7}  {'at x':>24} {'result':>24} {'bound':>5} "
        f"{'time':>6}")
  for op in OPS:
    for dt in DTYPES:
      x, what = inputs(op, dt, args.samples, args.seed)
      t = time.perf_counter()
      worst, at, got, frac = measure(op, dt, x, args.device)
      if dt is dtypes.float64 and args.decimal:
        xd = x[np.random.default_rng(args.seed).choice(x.size, min(args.decimal, x.size), replace=False)]
        worst_d, at_d, got_d, _ = measure(op, dt, xd, args.device, exact=True)
        if worst_d > worst: worst, at, got = worst_d, at_d, got_d
        what += f"+{xd.size}d"
      rows.append((op, dt, worst))
      print(f"{op.name:5} {NAMES[dt]:9} {what:>8} {worst:9.4f} {frac:7.2%}  {at!r:>24} {got!r:>24} {ULP_BOUNDS[dt][op]:5} "
            f"{time.perf_counter() - t:5.1f}s", flush=True)
  bad = [(op.name, NAMES[dt], w) for op, dt, w in rows if not w <= ULP_BOUNDS[dt][op]]
  print("all within the spec's bounds" if not bad else f"OVER THE BOUND: {bad}")
  raise SystemExit(1 if bad else 0)

suite = _suite()

if __name__ == "__main__": main()
