"""Fuzzer throughput: programs per second per backend, and where the workers' time goes.

  python bench/bench_fuzz.py [--time 20] [--jobs 2] [--backend CLANG --backend LLVM ...] [--batch 16]

For each backend (default: every one that opens but PYTHON) a campaign of --time seconds runs on that backend alone
(seed 0, reductions off, findings to a temporary folder), then prints programs/s and the share of worker time spent
generating (incl. the UB rewrites' emulator runs), emulating (the reference and the allowed-set variant), compiling
(render + compile + load), running and comparing. Budget (docs/architecture.md, "Performance budgets"): at least 20
programs/s for CLANG on 2 cores.
The machine's load average is printed too: the numbers are only comparable on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from refimpl.fuzz.campaign import PHASES, Config, resolve_backends, run_campaign

BUDGET = {"CLANG": 20.0}


def main() -> None:
  ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  ap.add_argument("--time", type=float, default=20.0)
  ap.add_argument("--jobs", type=int, default=2)
  ap.add_argument("--batch", type=int, default=16)
  ap.add_argument("--backend", action="append")
  ap.add_argument("--max-steps", type=int, default=Config.max_steps)
  args = ap.parse_args()
  names = [r.spec or r.name for r in resolve_backends(args.backend)]
  print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}  ({os.cpu_count()} CPUs, --jobs {args.jobs})")
  print(f"{'backend':<10}{'programs':>10}{'prog/s':>9}  {'ms/prog':>8}  " + "  ".join(f"{p:>8}" for p in PHASES) + "  budget")
  for name in names:
    with tempfile.TemporaryDirectory() as out:
      s = run_campaign(Config(seed=0, time=args.time, backends=[name], jobs=args.jobs, out=Path(out), quiet=True,
                              reduce=False, batch=args.batch, max_steps=args.max_steps))
    tot = dict(s.gen_times)
    for b in s.backends.values():
      for p, v in b.times.items(): tot[p] = tot.get(p, 0.0) + v
    worker = sum(tot.get(p, 0.0) for p in PHASES)
    rate = s.programs / max(s.elapsed, 1e-9)
    split = "  ".join(f"{100 * tot.get(p, 0.0) / max(worker, 1e-9):>7.0f}%" for p in PHASES)
    bname = next(iter(s.backends), name)
    budget = BUDGET.get(bname)
    verdict = "" if budget is None else f"{'ok' if rate >= budget else 'BELOW'} (>= {budget:.0f}/s)"
    print(f"{bname:<10}{s.programs:>10}{rate:>9.1f}  {1e3 * worker / max(s.programs, 1):>8.1f}  {split}  {verdict}")
    if s.occurrences:
      print(f"  ({s.occurrences} finding occurrence(s) along the way: {[str(r.finding.signature) for r in s.findings]})")
  print(f"load average after:  {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
  main()
