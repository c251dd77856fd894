"""CLANG backend benchmarks: compile latency per kernel (cold, cached, batched) and a 1M-element elementwise run.

  python bench/bench_clang.py [--kernels 24] [--runs 30]

cold     clang on one kernel's source (render done before; no cache), median over distinct kernels
cached   Compiler.compile_cached on a warm disk cache (read + sha256 check), median
load     ClangProgram: ELF link (elf.py) + CPUProgram mapping, median
batch B  compile_batch of B distinct kernels in one clang call, per kernel (wall time / B)
run      o[i] = a[i]*b[i] + 1 on 1M float32 (the reference kernel: docs/architecture.md, "Performance budgets"), median
         kernel time (CPUProgram, wait=True)
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

from refimpl.backends.ops_clang import ClangCompiler, ClangProgram
from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.ir import GroupOp, Ops, ProgramBuilder, alu_allows, elementwise
from refimpl.lower import lower_for
from refimpl.runner import Kernel


def kernels(n: int, tag: str) -> list[tuple[str, str]]:
  """(name, C source) of n distinct small elementwise kernels (ops x dtypes), named with `tag`."""
  r = Device["CLANG"].renderer
  combos = [(op, dt) for dt in (dtypes.float32, dtypes.int32, dtypes.float16, dtypes.float64, dtypes.uint8)
            for op in sorted(GroupOp.ALU - GroupOp.Transcendental, key=lambda o: o.value) if alu_allows(op, dt)]
  out = []
  for k, (op, dt) in enumerate(combos[:n]):
    p = lower_for(elementwise(op, dt, n=1024, name=f"k{tag}_{k}"), r)
    out.append((p.name, r.render(p.name, p)))
  return out

def median_ms(xs: list[float]) -> float: return 1e3 * statistics.median(xs)

def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--kernels", type=int, default=24)
  ap.add_argument("--runs", type=int, default=30)
  args = ap.parse_args()
  with tempfile.TemporaryDirectory() as cache:
    os.environ["REFIMPL_CACHE_DIR"] = cache
    comp = ClangCompiler()
    print(f"compiler: {' '.join(comp.command)}  ({comp.version.splitlines()[0]})")
    ks = kernels(args.kernels, "c")
    cold, cached, load = [], [], []
    for name, src in ks:
      t = time.perf_counter(); lib = comp.compile_cached(src); cold.append(time.perf_counter() - t)
      t = time.perf_counter(); comp.compile_cached(src); cached.append(time.perf_counter() - t)
      t = time.perf_counter(); ClangProgram(name, lib); load.append(time.perf_counter() - t)
    print(f"compile cold   median {median_ms(cold):7.2f} ms/kernel  (max {1e3 * max(cold):.2f})  over {len(ks)} kernels")
    print(f"compile cached median {median_ms(cached):7.3f} ms/kernel")
    print(f"ELF link+map   median {median_ms(load):7.3f} ms/kernel")
    for B in (1, 4, 16):
      per = []
      for rep in range(3):
        batch = kernels(B, f"b{B}r{rep}")
        t = time.perf_counter(); comp.compile_batch([s for _, s in batch]); per.append((time.perf_counter() - t) / B)
      print(f"batch of {B:2d}    median {median_ms(per):7.2f} ms/kernel")
  b = ProgramBuilder("mul_add_1m")
  n = 1 << 20
  o, x, y = b.global_buf(dtypes.float32, n), b.global_buf(dtypes.float32, n), b.global_buf(dtypes.float32, n)
  i = b.gidx(0, n)
  b.store(o, i, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(x, i), b.load(y, i)), b.const(1.0, dtypes.float32)))
  k = Kernel(b.build(), "CLANG")
  rng = np.random.default_rng(0)
  xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  bufs = [np.zeros(n, np.float32), xs, ys]
  res = k(*bufs)[0]
  assert (res == xs * ys + np.float32(1)).all()
  times = []
  ptrs = [a.ctypes.data for a in bufs]
  for _ in range(args.runs): times.append(k.prg(*ptrs, wait=True))
  t = statistics.median(times)
  print(f"run 1M float32 a*b+1: median {1e3 * t:.3f} ms  ({3 * 4 * n / t / 1e9:.1f} GB/s)  [Kernel call incl. copies: ", end="")
  t0 = time.perf_counter(); k(*bufs); print(f"{1e3 * (time.perf_counter() - t0):.1f} ms]")

if __name__ == "__main__":
  main()
