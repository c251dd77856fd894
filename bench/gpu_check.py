"""The GPU check: refimpl's verdict on an NVIDIA GPU, in one command, sized for about 10 minutes on one modern GPU.

  python bench/gpu_check.py [--out docs/conformance] [--fuzz-seconds 180] [--sweep-bits 32] [--device CUDA]

Parts, each writing its report under --out (the CUDA device must open: an NVIDIA driver and GPU):
  1. the packaged conformance suite on CUDA (python -m refimpl.conformance --backend CUDA, the `dev` hypothesis profile,
     all CPU cores): cuda-conformance.html / .md. TINYGRAD:CUDA and TINYGRAD:PTX are added when refimpl.tinygrad's
     TINYGRAD device opens them (refimpl.tinygrad.v0_10.backend runs tinygrad's CLANG, LLVM, GPU and PYTHON in this release;
     their compile path is tested in spec_tests/test_backend_cuda.py); a device that does not open is listed with why.
  2. a fuzz campaign on CUDA against the emulator (python -m refimpl.fuzz --backend CUDA --time N): findings under
     fuzz-findings/cuda, the summary in cuda-fuzz.txt.
  3. the float32 sweep: every float32 input (2^sweep-bits of them, the low bits first: 32 is all 2^32) of EXP2, LOG2,
     SIN, SQRT and RECIP on CUDA, in launches of 2^CHUNK_BITS lanes (a DEFINE_VAR picks the chunk), each result checked
     on the host against the spec's rule: SQRT and RECIP correctly rounded (bit for bit, NaN for NaN), EXP2 / LOG2 / SIN
     within their ULP bound of the correctly rounded reference with special values exact
     (refimpl.emulator.reference.correctly_rounded, refimpl.testing.compare.within_tolerance). The host check runs on
     all cores in threads (numpy releases the GIL). cuda-float32-sweep.md: per op, inputs checked, failures, the worst
     ULP distance, and the first failing inputs as reproducers.

The parts are functions (conformance, fuzz, sweep); the sweep's kernel, chunking and check run on any device
(spec_tests/test_backend_cuda.py runs them on a small range on a CPU device).
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from refimpl import spec
from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.emulator.reference import correctly_rounded
from refimpl.ir import Ops, Program, ProgramBuilder
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value, ulp_distance, within_tolerance

SWEEP_OPS = (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP)
CHUNK_BITS = 26   # 2^26 lanes (256 MiB of float32) per launch
LOCAL = 256
F32, U32 = dtypes.float32, dtypes.uint32


def sweep_program(op: Ops, chunk_bits: int = CHUNK_BITS, local: int = LOCAL) -> Program:
  """out[i] = op(the float32 whose bits are chunk << chunk_bits | i), for i in [0, 2^chunk_bits): gidx x lidx lanes,
  the chunk a DEFINE_VAR (the shift and OR on uint32, which wrap as the spec's ints do)."""
  n = 1 << chunk_bits
  b = ProgramBuilder(f"sweep_{op.name.lower()}_{chunk_bits}")
  out = b.global_buf(F32, n)
  chunk = b.var("chunk", 0, max(0, (1 << (32 - chunk_bits)) - 1))
  g, t = b.gidx(0, max(1, n // local)), b.lidx(0, min(local, n))
  i = b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(min(local, n), dtypes.int32)), t)
  bits = b.alu(Ops.OR, b.alu(Ops.SHL, b.cast(chunk, U32), b.const(chunk_bits, U32)), b.cast(i, U32))
  b.store(out, i, b.alu(op, b.bitcast(bits, F32)))
  return b.build()


def _check_slice(op: Ops, first_bits: int, got: np.ndarray) -> tuple[int, int, list[int]]:
  """(failures, worst ULP distance from the float64 result rounded to float32 where both are finite, up to 8 failing
  input bit patterns) of one slice.

  SQRT and RECIP: the float64 result rounded to float32 is the correctly rounded one (53 >= 2*24+2), compared bit for
  bit. EXP2, LOG2, SIN: that fast reference is within 1 ulp of the correctly rounded one, so a lane within bound-1 ulps
  of it, away from 0, the subnormals and the overflow threshold, is within the bound of the exact reference; where it
  is NaN the exact one is NaN too (the result must be NaN); every other lane is checked against
  refimpl.emulator.reference.correctly_rounded (extended precision, slow) with the tolerance
  rule (special values exact)."""
  x = (np.arange(got.size, dtype=np.uint64) + first_bits).astype(np.uint32).view(np.float32)
  with np.errstate(all="ignore"):
    x64 = x.astype(np.float64)
    if op is Ops.SQRT: fast = np.sqrt(x64).astype(np.float32)
    elif op is Ops.RECIP: fast = (1.0 / x64).astype(np.float32)
    else: fast = {Ops.EXP2: np.exp2, Ops.LOG2: np.log2, Ops.SIN: np.sin}[op](x64).astype(np.float32)
    finite = np.isfinite(got) & np.isfinite(fast)
    worst = int(ulp_distance(got[finite], fast[finite]).max()) if finite.any() else 0
    bound = spec.ulp_bound(op, F32)
    if bound is None: ok = same_value(got, fast)
    else:
      size = np.abs(fast)
      ok = (size > np.float32(2.0**-120)) & (size < np.float32(2.0**127)) & (ulp_distance(got, fast) <= bound - 1)
      nan = np.isnan(fast)  # an invalid operation (log2 of x < 0, sin of inf, a NaN input) is NaN in every precision
      ok[nan] = np.isnan(got[nan])
      slow = np.flatnonzero(~ok & ~nan)
      ok[slow] = within_tolerance(got[slow], correctly_rounded(op, x[slow], F32), bound)
  bad = np.flatnonzero(~ok)
  return int(bad.size), worst, [int(first_bits + k) for k in bad[:8]]


@dataclass
class SweepResult:
  op: Ops
  checked: int = 0
  failures: int = 0
  worst_ulp: int = 0
  examples: list[int] = field(default_factory=list)
  seconds: float = 0.0


def sweep(op: Ops, device: str, bits: int = 32, chunk_bits: int = CHUNK_BITS, threads: int | None = None,
          chunks: list[int] | None = None) -> SweepResult:
  """Every float32 input with bits below 2^bits (or only those of `chunks`, chunk k being the 2^chunk_bits inputs from
  k << chunk_bits) through `op` on `device`, checked against the spec (module docstring)."""
  chunk_bits = min(chunk_bits, bits)
  kernel, result, start = Kernel(sweep_program(op, chunk_bits), device), SweepResult(op), time.perf_counter()
  n, workers = 1 << chunk_bits, threads or os.cpu_count() or 1
  with concurrent.futures.ThreadPoolExecutor(workers) as pool:
    for chunk in chunks if chunks is not None else range(1 << (bits - chunk_bits)):
      (got,) = kernel(np.zeros(n, np.float32), vals=(chunk,))
      step = -(-n // workers)
      slices = [((chunk << chunk_bits) + s, got[s:s + step]) for s in range(0, n, step)]
      parts = pool.map(lambda part: _check_slice(op, *part), slices)
      for failures, worst, examples in parts:
        result.failures += failures
        result.worst_ulp = max(result.worst_ulp, worst)
        result.examples += examples[:max(0, 8 - len(result.examples))]
      result.checked += n
  result.seconds = time.perf_counter() - start
  return result


def sweep_report(results: list[SweepResult], device: str) -> str:
  """The markdown of the sweep: one row per op, then the reproducers (input bits, value, the device's result)."""
  lines = [f"# float32 sweep on {device}", "",
           "| op | inputs | failures | worst ULP from the f64 result (finite) | bound | seconds |",
           "|---|---|---|---|---|---|"]
  for r in results:
    bound = spec.ulp_bound(r.op, F32)
    lines.append(f"| {r.op.name} | {r.checked} | {r.failures} | {r.worst_ulp} | {'exact' if bound is None else bound} "
                 f"| {r.seconds:.1f} |")
  for r in results:
    if r.examples:
      xs = np.array(r.examples, np.uint32).view(np.float32)
      lines += ["", f"{r.op.name} fails on: " + ", ".join(f"0x{b:08x} ({x!r})" for b, x in zip(r.examples, xs.tolist()))]
  return "\n".join(lines) + "\n"


def conformance(out: Path, devices: list[str]) -> int:
  """The packaged conformance suite on the devices that open; returns pytest's exit status."""
  cmd = [sys.executable, "-m", "refimpl.conformance", "--quick", "-n", "auto", "--report", str(out / "cuda-conformance.html")]
  for d in devices: cmd += ["--backend", d]
  return subprocess.run(cmd).returncode


def fuzz(out: Path, seconds: int, device: str) -> int:
  """A fuzz campaign of `seconds` on `device`; the summary goes to cuda-fuzz.txt."""
  cmd = [sys.executable, "-m", "refimpl.fuzz", "--backend", device, "--time", str(seconds), "--out", "fuzz-findings/cuda",
         "--quiet"]
  done = subprocess.run(cmd, capture_output=True, text=True)
  (out / "cuda-fuzz.txt").write_text(done.stdout + done.stderr)
  return done.returncode


def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--out", type=Path, default=Path("docs/conformance"))
  ap.add_argument("--device", default="CUDA")
  ap.add_argument("--fuzz-seconds", type=int, default=180)
  ap.add_argument("--sweep-bits", type=int, default=32)
  ap.add_argument("--skip", action="append", default=[], choices=["conformance", "fuzz", "sweep"])
  args = ap.parse_args(argv)
  why = Device.open_error(args.device)
  if why is not None: sys.exit(f"gpu_check: {args.device} does not open: {why}")
  print(f"gpu_check: {Device[args.device].describe()}", flush=True)
  args.out.mkdir(parents=True, exist_ok=True)
  status = 0
  if "sweep" not in args.skip:
    results = []
    for op in SWEEP_OPS:
      results.append(sweep(op, args.device, args.sweep_bits))
      r = results[-1]
      print(f"sweep {op.name}: {r.failures} failures of {r.checked} ({r.seconds:.0f} s)", flush=True)
    (args.out / "cuda-float32-sweep.md").write_text(sweep_report(results, args.device))
    status |= any(r.failures for r in results)
  if "conformance" not in args.skip:
    extra = [d for d in ("TINYGRAD:CUDA", "TINYGRAD:PTX") if Device.open_error(d) is None]
    for d in ("TINYGRAD:CUDA", "TINYGRAD:PTX"):
      if d not in extra: print(f"gpu_check: {d} is not run: {Device.open_error(d)}", flush=True)
    status |= conformance(args.out, [args.device, *extra]) != 0
  if "fuzz" not in args.skip: status |= fuzz(args.out, args.fuzz_seconds, args.device) != 0
  return int(status)


if __name__ == "__main__":
  sys.exit(main())
