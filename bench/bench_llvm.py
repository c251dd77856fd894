"""LLVM backend benchmarks, each against CLANG in the same run: compile latency per kernel and 1M-element run time.

  python bench/bench_llvm.py [--kernels 24] [--runs 30]

render   the renderer (Program -> LLVM IR / C source), median per kernel
cold     compile of one kernel's rendered source, no cache: llvmlite (parse, verify, optimize, emit the object, in process)
         at O2 and O0 vs clang -O2 (a subprocess), median over the same distinct elementwise kernels (ops x dtypes)
load     ELF link (elf.py) + CPUProgram mapping, median
run      1M-element elementwise kernels, median kernel time (CPUProgram, wait=True): o = a*b + 1 on float32 (the
         reference kernel: docs/architecture.md, "Performance budgets") and on float16 (LLVM and CLANG both compute
         narrow floats through bit manipulation)
Ratios are LLVM / CLANG (below 1: LLVM is faster).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from refimpl.device import Device
from refimpl.dtype import dtypes, to_np
from refimpl.ir import GroupOp, Ops, ProgramBuilder, alu_allows, elementwise
from refimpl.lower import lower_for
from refimpl.runner import Kernel


def programs(n: int, tag: str) -> list:
  """n distinct small elementwise kernels (ops x dtypes) lowered for LLVM and CLANG (lower_for), named with `tag`."""
  combos = [(op, dt) for dt in (dtypes.float32, dtypes.int32, dtypes.float16, dtypes.float64, dtypes.uint8)
            for op in sorted(GroupOp.ALU - GroupOp.Transcendental, key=lambda o: o.value) if alu_allows(op, dt)]
  r = Device["LLVM"].renderer  # CLANG's renderer needs the same passes
  return [lower_for(elementwise(op, dt, n=1024, name=f"k{tag}_{k}"), r) for k, (op, dt) in enumerate(combos[:n])]

def median_ms(xs: list[float]) -> float: return 1e3 * statistics.median(xs)

def timed(fn, *args) -> tuple[float, object]:
  t = time.perf_counter()
  r = fn(*args)
  return time.perf_counter() - t, r

def compile_latency(device: str, progs: list) -> dict[str, list[float]]:
  dev = Device[device]
  out: dict[str, list[float]] = {"render": [], "cold": [], "load": []}
  for p in progs:
    t, src = timed(dev.renderer.render, p.name, p)
    out["render"].append(t)
    t, lib = timed(dev.compiler.compile, src)  # compile(), not compile_cached(): always cold
    out["cold"].append(t)
    t, _ = timed(dev.runtime, p.name, lib)
    out["load"].append(t)
  return out

def mul_add_1m(dt) -> object:
  b = ProgramBuilder(f"mul_add_1m_{dt.name}")
  n = 1 << 20
  o, x, y = b.global_buf(dt, n), b.global_buf(dt, n), b.global_buf(dt, n)
  i = b.gidx(0, n)
  b.store(o, i, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(x, i), b.load(y, i)), b.const(1.0, dt)))
  return b.build()

def run_time(device: str, dt, runs: int) -> float:
  p = mul_add_1m(dt)
  k = Kernel(p, device)
  n = 1 << 20
  rng = np.random.default_rng(0)
  xs, ys = (rng.standard_normal(n).astype(to_np(dt)) for _ in range(2))
  bufs = [np.zeros(n, to_np(dt)), xs, ys]
  res = k(*bufs)[0]
  with np.errstate(over="ignore"): want = (xs * ys + to_np(dt).type(1)).astype(to_np(dt))
  assert (res == want).all(), f"{device}: wrong results"
  ptrs = [a.ctypes.data for a in bufs]
  return statistics.median(k.prg(*ptrs, wait=True) for _ in range(runs))

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--kernels", type=int, default=24)
  ap.add_argument("--runs", type=int, default=30)
  args = ap.parse_args()
  with tempfile.TemporaryDirectory() as cache:
    os.environ["REFIMPL_CACHE_DIR"] = cache
    llvm = Device["LLVM"].compiler
    print(f"LLVM: {llvm.version}, {llvm.triple}, cpu {llvm.cpu}")
    progs = programs(args.kernels, "b")
    compile_latency("LLVM", programs(2, "warm"))  # first-use costs (target init) out of the medians
    compile_latency("CLANG", programs(2, "warm"))
    res = {d: compile_latency(d, progs) for d in ("LLVM", "LLVM:O0", "CLANG")}
    clang_cold = median_ms(res["CLANG"]["cold"])
    print(f"compile latency per kernel, median over {len(progs)} elementwise kernels (render / cold compile / ELF load, ms):")
    for d, r in res.items():
      cold = median_ms(r["cold"])
      print(f"  {d:<8} render {median_ms(r['render']):6.2f}   cold {cold:7.2f} (max {1e3 * max(r['cold']):6.2f})   "
            f"load {median_ms(r['load']):5.2f}   cold vs CLANG {cold / clang_cold:5.2f}x")
    print(f"run time, 1M elements o = a*b + 1, median of {args.runs} (ms):")
    for dt in (dtypes.float32, dtypes.float16):
      times = {d: run_time(d, dt, args.runs) for d in ("LLVM", "LLVM:O0", "CLANG")}
      line = "   ".join(f"{d} {1e3 * t:7.3f}" for d, t in times.items())
      print(f"  {dt.name:<6} {line}   LLVM/CLANG {times['LLVM'] / times['CLANG']:5.2f}x   "
            f"({3 * dt.itemsize * (1 << 20) / times['LLVM'] / 1e9:.1f} GB/s on LLVM)")

if __name__ == "__main__":
  main()
