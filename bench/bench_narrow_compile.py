"""Compile time of narrow-float programs (float16, bfloat16, fp8) on CLANG, LLVM and GPU: render + cold compile.

  python bench/bench_narrow_compile.py [--repeat 3] [--devices CLANG,LLVM,GPU]

Programs (grid form; lowered to loops for CLANG and LLVM as the runner does):
  chain_<dt>    a 24-op elementwise chain on float16 / bfloat16 (ADD SUB MUL FDIV SQRT RECIP MULACC MAX NEG CMPLT WHERE)
  vec4_half     the float16 chain on float16.vec(4) loads and stores
  casts         every source dtype (bool, ints, float32/64, the narrow formats) cast to every narrow format, and every
                narrow format cast to int32, int64, float64 and the other narrow formats
  exp2_half     EXP2, LOG2 and SIN on float16 (decomposed through float32, rounded once at the end)
  ops           the suite's shape: one small kernel per ALU op x float16/bfloat16 (medians are per kernel)
render is the renderer's time (Program -> source, lowering passes included), cold the compiler's (no cache: compile(),
not compile_cached(); PoCL's own kernel cache is off), each the median of --repeat runs with fresh kernel names.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("POCL_KERNEL_CACHE", "0")
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.ir import Ops, ProgramBuilder, alu_allows, elementwise
from refimpl.lower import lower_for

NARROW = (dtypes.float16, dtypes.bfloat16, dtypes.fp8e4m3, dtypes.fp8e5m2)
CHAIN = (Ops.ADD, Ops.MUL, Ops.SUB, Ops.FDIV, Ops.SQRT, Ops.MAX, Ops.MULACC, Ops.NEG, Ops.RECIP, Ops.CMPLT)
N = 256


def chain(name: str, dt, count: int = 1) -> object:
  """x, y loaded; 24 ops each using the last two values; the last stored."""
  b = ProgramBuilder(name)
  o, x, y = b.global_buf(dt, N * count), b.global_buf(dt, N * count), b.global_buf(dt, N * count)
  i = b.alu(Ops.MUL, b.gidx(0, N), b.const(count, dtypes.int32))
  vals = [b.load(x, i, count=count), b.load(y, i, count=count)]
  for k in range(24):
    op, a, c = CHAIN[k % len(CHAIN)], vals[-1], vals[-2]
    if op is Ops.CMPLT: v = b.alu(Ops.WHERE, b.alu(Ops.CMPLT, a, c), a, c)
    elif op in (Ops.SQRT, Ops.NEG, Ops.RECIP): v = b.alu(op, a)
    elif op is Ops.MULACC: v = b.alu(op, a, c, a)
    else: v = b.alu(op, a, c)
    vals.append(v)
  b.store(o, i, vals[-1])
  return b.build()


def casts(name: str) -> object:
  """Every source dtype to every narrow format, and every narrow format to int32, int64, float64 and the others."""
  srcs = (dtypes.bool, dtypes.int8, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64, dtypes.float32,
          dtypes.float64, *NARROW)
  b = ProgramBuilder(name)
  ins = {dt: b.global_buf(dt, N) for dt in srcs}
  outs = {dt: b.global_buf(dt, N * len(srcs)) for dt in NARROW}
  wide = {dt: b.global_buf(dt, N * len(NARROW)) for dt in (dtypes.int32, dtypes.int64, dtypes.float64)}
  i = b.gidx(0, N)
  for k, s in enumerate(srcs):
    x = b.load(ins[s], i)
    for d, buf in outs.items():
      if d is not s: b.store(buf, b.alu(Ops.ADD, i, b.const(k * N, dtypes.int32)), b.cast(x, d))
    if s in NARROW:
      for d, buf in wide.items(): b.store(buf, b.alu(Ops.ADD, i, b.const(NARROW.index(s) * N, dtypes.int32)), b.cast(x, d))
  return b.build()


def transcendentals(name: str) -> object:
  b = ProgramBuilder(name)
  o, x = b.global_buf(dtypes.float16, N * 3), b.global_buf(dtypes.float16, N)
  i = b.gidx(0, N)
  v = b.load(x, i)
  for k, op in enumerate((Ops.EXP2, Ops.LOG2, Ops.SIN)): b.store(o, b.alu(Ops.ADD, i, b.const(k * N, dtypes.int32)), b.alu(op, v))
  return b.build()


def suite_kernels(tag: str) -> list:
  ops = sorted({*CHAIN, Ops.CMPNE, Ops.WHERE}, key=lambda o: o.value)
  return [elementwise(op, dt, n=N, name=f"ops_{tag}_{dt.name}_{op.name.lower()}")
          for dt in (dtypes.float16, dtypes.bfloat16) for op in ops if alu_allows(op, dt)]


def programs(tag: str) -> dict[str, list]:
  return {"chain_half": [chain(f"ch_{tag}", dtypes.float16)], "chain_bf16": [chain(f"cb_{tag}", dtypes.bfloat16)],
          "vec4_half": [chain(f"cv_{tag}", dtypes.float16, 4)], "casts": [casts(f"cs_{tag}")],
          "exp2_half": [transcendentals(f"tr_{tag}")], "ops": suite_kernels(tag)}


def measure(device: str, progs: list) -> tuple[list[float], list[float], int]:
  """Per kernel: render seconds, cold compile seconds; and the total source size."""
  dev = Device[device]
  renders, colds, size = [], [], 0
  for p in progs:
    t = time.perf_counter()
    src = dev.renderer.render(p.name, lower_for(p, dev.renderer))
    renders.append(time.perf_counter() - t)
    t = time.perf_counter()
    dev.compiler.compile(src)
    colds.append(time.perf_counter() - t)
    size += len(src)
  return renders, colds, size


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--repeat", type=int, default=3)
  ap.add_argument("--devices", default="CLANG,LLVM,GPU")
  args = ap.parse_args()
  for device in args.devices.split(","):
    try: Device[device]
    except Exception as e:
      print(f"{device}: not available ({e})")
      continue
    measure(device, programs("warm")["chain_half"])  # first-use costs out of the medians
    res: dict[str, tuple[list[float], list[float], int]] = {}
    for r in range(args.repeat):
      for what, progs in programs(f"r{r}").items():
        rs, cs, size = measure(device, progs)
        old = res.get(what, ([], [], 0))
        res[what] = (old[0] + rs, old[1] + cs, size)
    print(f"{device}: median ms per kernel over {args.repeat} runs (render / cold compile / source bytes)")
    for what, (rs, cs, size) in res.items():
      n = len(programs('x')[what])
      print(f"  {what:<11} render {1e3 * statistics.median(rs):7.2f}   cold {1e3 * statistics.median(cs):8.2f}   "
            f"source {size // n:7d}")


if __name__ == "__main__":
  main()
