"""GPU (OpenCL) backend benchmarks: build latency per kernel (cold and cached) and a 1M-element elementwise run vs CLANG.

  python bench/bench_gpu.py [--kernels 24] [--runs 30] [--driver-cache]

The compiler keeps program binaries on every platform here (CLCompiler(keep_binary=True)), PoCL included, whose default
keeps none (ops_gpu.CLCompiler says why): the rows below time that path.
cold     CLCompiler.compile: clBuildProgram from source + reading the program binary, median over distinct kernels
         (the driver's own kernel cache is off unless --driver-cache: PoCL's POCL_KERNEL_CACHE=0)
load     CLProgram from the cached binary: clCreateProgramWithBinary + build + clCreateKernel, median
first    the first launch of a loaded kernel (PoCL generates the work-group function for the local size here), median
cached   Compiler.compile_cached on a warm disk cache (read + sha256 check), median
Kernel   runner.Kernel(program) end to end on a warm cache (render + cached compile + load), median
run      o[i] = a[i]*b[i] + 1 on 1M float32 (the reference kernel: docs/architecture.md, "Performance budgets"): median
         kernel time on GPU (OpenCL profiling counters) and on CLANG in the same run, and the GPU's wall time per launch
         (enqueue + wait)
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


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--kernels", type=int, default=24)
  ap.add_argument("--runs", type=int, default=30)
  ap.add_argument("--driver-cache", action="store_true", help="leave the OpenCL driver's own kernel cache on")
  args = ap.parse_args()
  if not args.driver_cache: os.environ["POCL_KERNEL_CACHE"] = "0"  # before the platform initializes

  from refimpl.backends.ops_gpu import CLCompiler, CLProgram, GPUDevice
  from refimpl.device import Device
  from refimpl.dtype import dtypes
  from refimpl.ir import GroupOp, Ops, ProgramBuilder, alu_allows, elementwise
  from refimpl.lower import lower_for
  from refimpl.runner import Kernel

  dev = Device["GPU"]
  assert isinstance(dev, GPUDevice)
  print(f"device: {dev.describe()}")
  combos = [(op, dt) for dt in (dtypes.float32, dtypes.int32, dtypes.float16, dtypes.float64, dtypes.uint8)
            for op in sorted(GroupOp.ALU - GroupOp.Transcendental, key=lambda o: o.value) if alu_allows(op, dt)]
  progs = [elementwise(op, dt, n=1024, name=f"kg_{k}") for k, (op, dt) in enumerate(combos[:args.kernels])]
  srcs = [dev.renderer.render(p.name, lower_for(p, dev.renderer)) for p in progs]
  with tempfile.TemporaryDirectory() as cache:
    os.environ["REFIMPL_CACHE_DIR"] = cache
    comp = CLCompiler(dev, keep_binary=True)
    cold, load, first, cached, kernel = [], [], [], [], []
    for p, src in zip(progs, srcs):
      t = time.perf_counter(); lib = comp.compile_cached(src); cold.append(time.perf_counter() - t)
      t = time.perf_counter(); comp.compile_cached(src); cached.append(time.perf_counter() - t)
      t = time.perf_counter(); prg = CLProgram(dev, p.name, lib); load.append(time.perf_counter() - t)
      bufs = [dev.allocator.alloc(b.size * b.base.itemsize) for _, b in sorted(p.buffers.items())]
      t = time.perf_counter(); prg(*bufs, global_size=p.global_size, local_size=p.local_size, wait=True)
      first.append(time.perf_counter() - t)
    dev.compiler = comp  # Kernel() below goes through this warm cache
    for p in progs:
      t = time.perf_counter(); Kernel(p, "GPU"); kernel.append(time.perf_counter() - t)
  ms = lambda xs: 1e3 * statistics.median(xs)
  print(f"build cold     median {ms(cold):7.1f} ms/kernel  (max {1e3 * max(cold):.1f})  over {len(progs)} kernels"
        f"{'' if args.driver_cache else '  [driver cache off]'}")
  print(f"load binary    median {ms(load):7.2f} ms/kernel")
  print(f"first launch   median {ms(first):7.2f} ms/kernel")
  print(f"cached lookup  median {ms(cached):7.3f} ms/kernel")
  print(f"Kernel() warm  median {ms(kernel):7.2f} ms/kernel  (render + cached compile + load)")

  n = 1 << 20
  b = ProgramBuilder("mul_add_1m")
  o, x, y = b.global_buf(dtypes.float32, n), b.global_buf(dtypes.float32, n), b.global_buf(dtypes.float32, n)
  i = b.alu(Ops.ADD, b.alu(Ops.MUL, b.gidx(0, n // 256), b.const(256, dtypes.int32)), b.lidx(0, 256))
  b.store(o, i, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(x, i), b.load(y, i)), b.const(1.0, dtypes.float32)))
  prog = b.build()
  rng = np.random.default_rng(0)
  xs, ys = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
  arrays = [np.zeros(n, np.float32), xs, ys]
  k = Kernel(prog, "GPU")
  assert (k(*arrays)[0] == xs * ys + np.float32(1)).all()
  bufs = [dev.allocator.alloc(4 * n) for _ in range(3)]
  for buf, arr in zip(bufs, arrays): dev.allocator._copyin(buf, memoryview(arr).cast("B"))
  kt, wall = [], []
  for _ in range(args.runs):
    t = time.perf_counter()
    kt.append(k.prg(*bufs, global_size=prog.global_size, local_size=prog.local_size, wait=True))
    wall.append(time.perf_counter() - t)
  gpu_t = statistics.median(kt)
  print(f"run 1M float32 a*b+1 on GPU:   median {1e3 * gpu_t:.3f} ms kernel ({12 * n / gpu_t / 1e9:.1f} GB/s), "
        f"{ms(wall):.3f} ms per launch incl. enqueue+wait  (local size 256)")
  try:
    kc = Kernel(prog, "CLANG")
  except Exception as e:  # CLANG is optional here: the comparison is skipped with the reason
    print(f"run 1M float32 a*b+1 on CLANG: not available ({e})")
    return
  assert (kc(*arrays)[0] == xs * ys + np.float32(1)).all()
  ptrs = [arr.ctypes.data for arr in arrays]
  clang_t = statistics.median([kc.prg(*ptrs, wait=True) for _ in range(args.runs)])
  print(f"run 1M float32 a*b+1 on CLANG: median {1e3 * clang_t:.3f} ms kernel ({12 * n / clang_t / 1e9:.1f} GB/s); "
        f"GPU/CLANG = {gpu_t / clang_t:.2f}x")

if __name__ == "__main__":
  main()
