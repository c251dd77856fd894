"""Emulator speed on a 1M-element elementwise kernel (docs/architecture.md, "Performance budgets").

    python bench/bench_emulator.py [--n 1048576] [--naive-n 16384] [--repeat 20]

Kernel: out[i] = a[i] * b[i] + 1 in float32, one thread per element (two loads, two ALU ops, one store).
Measures refimpl.emulator.machine.emulate() (the whole call: verification, input copies, index analysis, execution;
best and median of --repeat runs, how much of it alu.exec_alu takes, and the page faults per run) against
  - bench/naive_interpreter.py, a per-element Python interpreter, timed on --naive-n elements and scaled linearly
    to n (it is linear in the number of threads: one independent pass per thread). Budget: emulator >= 100x faster.
  - the CLANG backend's own run time (Kernel.last_time: the kernel alone, on buffers already allocated and written),
    when that device exists. Budget: emulator <= 20x CLANG.
emulate() is timed twice. "cold": glibc's default allocator, which hands the memory of a finished run back to the
OS, so every run page-faults its fresh arrays in again (input copies, alu's temporaries); in a VM a fault can cost
microseconds and then dominates. "warm": after mallopt() keeps freed memory in the process (set here, for the rest of
this script only), which is the footing CLANG's own timing stands on. Both are printed; the exit status judges warm.
All results are checked equal to numpy's before anything is timed.
"""
from __future__ import annotations

import argparse
import ctypes
import pathlib
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))  # run from anywhere in a checkout

from bench.naive_interpreter import interpret
from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, Program, ProgramBuilder

F32 = dtypes.float32


def kernel(n: int) -> Program:
  b = ProgramBuilder("axpb")
  out, x, y = (b.global_buf(F32, n) for _ in range(3))
  i = b.gidx(0, n)
  b.store(out, i, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(x, i), b.load(y, i)), b.const(1.0, F32)))
  return b.build()

def inputs(n: int, seed: int = 0) -> list[np.ndarray]:
  rng = np.random.default_rng(seed)
  return [np.zeros(n, np.float32), rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)]

def minor_faults() -> int | None:
  try:
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
  except (ImportError, AttributeError): return None

def keep_freed_memory() -> bool:
  """glibc only: keep freed memory in the process (no trimming, large blocks from the heap). False where unavailable."""
  try: libc = ctypes.CDLL("libc.so.6")
  except OSError: return False
  M_TRIM_THRESHOLD, M_TOP_PAD, M_MMAP_THRESHOLD = -1, -2, -3
  settings = ((M_MMAP_THRESHOLD, 32 << 20), (M_TRIM_THRESHOLD, 1 << 30), (M_TOP_PAD, 64 << 20))
  return all(libc.mallopt(k, v) == 1 for k, v in settings)

def time_emulate(program: Program, bufs: list[np.ndarray], repeat: int, label: str) -> float:
  """Prints best / median / faults per run of emulate(); returns the best time."""
  emulate(program, bufs)
  f0 = minor_faults()
  times = timed(lambda: emulate(program, bufs), repeat)
  f1 = minor_faults()
  faults = "" if f0 is None else f"   page faults/run {(f1 - f0) / repeat:6.0f}"
  best, median = min(times) * 1e3, statistics.median(times) * 1e3
  print(f"emulator   emulate() {label:5s} best {best:8.2f} ms   median {median:8.2f} ms{faults}")
  return min(times)

def timed(fn, repeat: int) -> list[float]:
  out = []
  for _ in range(repeat):
    start = time.perf_counter()
    fn()
    out.append(time.perf_counter() - start)
  return out

def alu_share(program: Program, bufs: list[np.ndarray], repeat: int) -> float:
  """Seconds per emulate() spent inside alu.exec_alu (the op semantics), averaged over `repeat` runs."""
  spent, orig = [0.0], alu.exec_alu
  def wrapped(*args):
    start = time.perf_counter()
    try: return orig(*args)
    finally: spent[0] += time.perf_counter() - start
  alu.exec_alu = wrapped
  try: timed(lambda: emulate(program, bufs), repeat)
  finally: alu.exec_alu = orig
  return spent[0] / repeat

def device_seconds(program: Program, bufs: list[np.ndarray], device: str, repeat: int) -> float | None:
  """Best run time of the kernel on a device as its runtime measures it (buffers already on the device: for PYTHON,
  the emulator in place), or None when the device is unavailable."""
  from refimpl.device import DeviceError
  from refimpl.runner import Kernel
  try: k = Kernel(program, device)
  except (DeviceError, ImportError) as e:
    print(f"{device}: skipped ({e})")
    return None
  np.testing.assert_array_equal(k(*bufs)[0], bufs[1] * bufs[2] + np.float32(1))
  times = []
  for _ in range(repeat):
    k(*bufs)
    if k.last_time is not None: times.append(k.last_time)
  return min(times) if times else None


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("--n", type=int, default=1 << 20)
  ap.add_argument("--naive-n", type=int, default=1 << 14)
  ap.add_argument("--repeat", type=int, default=20)
  args = ap.parse_args()
  n, small = args.n, args.naive_n
  program, bufs = kernel(n), inputs(n)
  want = bufs[1] * bufs[2] + np.float32(1)
  np.testing.assert_array_equal(emulate(program, bufs).buffers[0], want)
  sprog, sbufs = kernel(small), inputs(small, seed=1)
  np.testing.assert_array_equal(interpret(sprog, sbufs)[0], emulate(sprog, sbufs).buffers[0])
  print(f"kernel: out = a*b + 1, float32, n = {n}")

  cold = time_emulate(program, bufs, args.repeat, "cold")
  print(f"           of which alu.exec_alu (cold): {alu_share(program, bufs, args.repeat) * 1e3:.2f} ms on average")
  naive = min(timed(lambda: interpret(sprog, sbufs), 2)) * n / small
  print(f"naive      per element           {naive * 1e3:8.0f} ms   (timed on n = {small}, scaled x{n / small:g})")
  clang = device_seconds(program, bufs, "CLANG", args.repeat)
  if clang is not None: print(f"CLANG      kernel                best {clang * 1e3:8.3f} ms")
  on_device = device_seconds(program, bufs, "PYTHON", args.repeat)
  if on_device is not None:
    print(f"PYTHON     device, in place      best {on_device * 1e3:8.3f} ms" +
          (f"   ({on_device / clang:.1f}x CLANG, same footing: both on buffers already on their device)" if clang else ""))
  warm = time_emulate(program, bufs, args.repeat, "warm") if keep_freed_memory() else None
  if warm is not None:
    print(f"           of which alu.exec_alu (warm): {alu_share(program, bufs, args.repeat) * 1e3:.2f} ms on average")

  ok = True
  for label, emu in (("cold", cold), ("warm", warm)):
    if emu is None: continue
    ratio = naive / emu
    print(f"emulator ({label}) vs naive: {ratio:6.0f}x faster (budget >= 100x): {'PASS' if ratio >= 100 else 'FAIL'}")
    if clang is not None:
      print(f"emulator ({label}) vs CLANG: {emu / clang:6.1f}x slower (budget <= 20x): {'PASS' if emu / clang <= 20 else 'FAIL'}")
    if label == ("warm" if warm is not None else "cold"): ok = ratio >= 100 and (clang is None or emu / clang <= 20)
  return 0 if ok else 1


if __name__ == "__main__":
  sys.exit(main())
