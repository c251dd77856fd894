"""Fuzzer throughput: programs per second per backend, where the workers' time goes, and (--reduce) how far and how fast
findings of planted bugs reduce.

  python bench/bench_fuzz.py [--time 60] [--jobs 2] [--backend CLANG --backend LLVM ...] [--batch 16] [--mode mix]
  python bench/bench_fuzz.py --reduce [--iterations 48] [--backend planted_gpu:FloorDivGPU ...]

Throughput. For each backend (default: every one that opens but PYTHON) a campaign of --time seconds runs on that
backend alone (seed 0, reductions off, findings to a temporary folder) and prints
  prog/s     programs over the campaign's whole time (what `python -m refimpl.fuzz --time T` reports)
  steady/s   programs per second once the workers had started (their imports and opened devices take seconds of CPU
             each, which a 600 s campaign does not notice and a 20 s one does)
  cpu ms     the workers' CPU time per program (user + system, their compilers included; start-up included): the cost
             that does not depend on what else the machine runs; 2 cores give at most 2000 / cpu ms programs/s
  then ms of worker time per program in each phase: generate (incl. the UB rewrites' emulator runs), emulate (the
  reference and the allowed-set variant), render (grid lowering + rendering), compile (+ load), launch (buffers,
  copies and, on PoCL, the code generation at a kernel's first launch), run (the kernel as the device timed it),
  compare.
Budgets (docs/architecture.md, "Performance budgets"): on 2 cores, CLANG >= 25, LLVM >= 20, GPU >= 10 programs/s.
The load average is printed before and after each campaign: the numbers are only comparable on an otherwise idle
machine (other processes take CPU from the workers; cpu ms is the figure that stays).

Reduction (--reduce). One campaign of --iterations programs over planted backends (default: the GPU variants in
bench/planted_gpu.py and refimpl/fuzz/planted.py), reductions on with the default --reduce-time: every finding with
its uops before and after and the seconds and candidates its reduction took.
"""
from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)  # planted_gpu, for the workers too (spawned processes inherit sys.path)

from refimpl.fuzz.campaign import resolve_backends, run_campaign  # noqa: E402
from refimpl.fuzz.config import Config  # noqa: E402
from refimpl.fuzz.summary import PHASES, Summary  # noqa: E402

BUDGET = {"CLANG": 25.0, "LLVM": 20.0, "GPU": 10.0}
REDUCE_BACKENDS = ["planted_gpu:FloorDivGPU", "refimpl.fuzz.planted:ContractGPU", "refimpl.fuzz.planted:FlushMulGPU",
                   "refimpl.fuzz.planted:LongToFloatGPU", "refimpl.fuzz.planted:DoubleToHalfGPU"]


def children_cpu() -> float:
  """CPU seconds (user + system) of this process's finished children: the campaign's workers and their compilers."""
  r = resource.getrusage(resource.RUSAGE_CHILDREN)
  return r.ru_utime + r.ru_stime


def load() -> str: return f"{os.getloadavg()[0]:.2f}"


def phase_ms(s: Summary) -> dict[str, float]:
  """ms of worker time per program in each phase (the backend phases per run of the one backend)."""
  n = max(s.programs, 1)
  out = {p: 1e3 * s.gen_times.get(p, 0.0) / n for p in PHASES}
  for b in s.backends.values():
    for p, v in b.times.items(): out[p] = out.get(p, 0.0) + 1e3 * v / max(b.runs, 1)
  return out


def throughput(args) -> None:
  names = [r.spec or r.name for r in resolve_backends(args.backend)]
  print(f"{os.cpu_count()} CPUs, --jobs {args.jobs}, --batch {args.batch}, --time {args.time:g} s, mode {args.mode}")
  print(f"{'backend':<8}{'programs':>9}{'prog/s':>8}{'steady/s':>9}{'cpu ms':>8}  " + "".join(f"{p:>9}" for p in PHASES) +
        "  budget        load before -> after")
  for name in names:
    before, cpu0 = load(), children_cpu()
    with tempfile.TemporaryDirectory() as out:
      s = run_campaign(Config(seed=0, time=args.time, backends=[name], jobs=args.jobs, out=Path(out), quiet=True,
                              reduce=False, batch=args.batch, max_steps=args.max_steps, mode=args.mode))
    cpu = 1e3 * (children_cpu() - cpu0) / max(s.programs, 1)
    rate, steady = s.programs / max(s.elapsed, 1e-9), s.steady_rate or 0.0
    bname = next(iter(s.backends), name)
    budget = BUDGET.get(bname)
    verdict = "" if budget is None else f"{'ok' if steady >= budget else 'BELOW'} (>= {budget:.0f})"
    split = "".join(f"{v:>9.1f}" for v in phase_ms(s).values())
    print(f"{bname:<8}{s.programs:>9}{rate:>8.1f}{steady:>9.1f}{cpu:>8.1f}  {split}  {verdict:<13} {before} -> {load()}")
    if s.occurrences:
      print(f"  ({s.occurrences} finding occurrence(s) along the way: {[str(r.finding.signature) for r in s.findings]})")


def reductions(args) -> None:
  backends = args.backend or REDUCE_BACKENDS
  before = load()
  with tempfile.TemporaryDirectory() as out:
    s = run_campaign(Config(seed=0, iterations=args.iterations, backends=backends, jobs=args.jobs, out=Path(out),
                            quiet=True, batch=args.batch, max_steps=args.max_steps, mode=args.mode))
  print(f"{args.iterations} programs on {', '.join(s.backends)} in {s.elapsed:.0f} s (reduce-time {Config.reduce_time:g} s"
        f" per finding); load {before} -> {load()}")
  print(f"  {'finding':<58}{'uops':>6}{'from':>6}{'seconds':>9}{'candidates':>12}")
  for r in s.findings:
    f = r.finding
    print(f"  {f.signature!s:<58}{len(f.case.program.uops):>6}{f.uops_before:>6}{r.reduce_s:>9.1f}{r.candidates:>12}")
  sizes = [len(r.finding.case.program.uops) for r in s.findings]
  if sizes: print(f"  {sum(x <= 10 for x in sizes)}/{len(sizes)} reduced to <= 10 uops; largest {max(sizes)}")


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--time", type=float, default=60.0)
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--batch", type=int, default=Config.batch)
  ap.add_argument("--backend", action="append")
  ap.add_argument("--max-steps", type=int, default=Config.max_steps)
  ap.add_argument("--mode", default=Config.mode)
  ap.add_argument("--reduce", action="store_true", help="measure reductions of planted findings instead")
  ap.add_argument("--iterations", type=int, default=48)
  args = ap.parse_args()
  if args.reduce: reductions(args)
  else: throughput(args)


if __name__ == "__main__":
  main()
