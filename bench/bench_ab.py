"""Two checkouts of refimpl, kernel by kernel: the emulator's time on real kernels, one checkout against another.

    python bench/bench_ab.py --capture DIR                      # tinygrad's workload kernels as REFIMPL gets them
    python bench/bench_ab.py ROOT_A ROOT_B --kernels DIR [--corpus] [--only NAME] [--rounds 4] [--runs 10]

A change to the emulator moves a kernel by a few percent, and this machine's timings move by as much from one minute to
the next; only kernels timed alternately, in one sitting, compare. `--capture DIR` runs bench/bench_tinygrad.py's
workloads (the small and the kernel-heavy ones, but the 1024 matmul, which takes a second a run) on tinygrad's REFIMPL
device (refimpl's, refimpl.tinygrad.v0_10) and writes each distinct kernel to DIR: <workload>__<kernel>.json (the
program) and .npz (its buffers before the run and its vals: plain arrays, read back without pickle). The comparison
then times each kernel (and with `--corpus`, each kernel of corpus/tinygrad-0.10.1 with its case's inputs) on the PYTHON
device of each checkout, in a fresh process per checkout and round (`--worker`, which imports refimpl from that root),
the checkouts' order alternating from round to round: each process runs each kernel WARMUP times untimed (a plan's
steps are made on its STRAIGHT_FROM-th run), then --runs times, keeping the best. Printed: each kernel's best time per
checkout over all rounds, B/A, and the geometric mean of B/A. A kernel either checkout fails on is reported with its
error and left out of the mean.
"""
from __future__ import annotations

import argparse
import json
import math
import pathlib
import subprocess
import sys
import time

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
WARMUP = 6  # untimed runs first: the plan on the first, its steps on settings.STRAIGHT_FROM's


def capture(out: pathlib.Path) -> None:
  """Writes the kernels of bench_tinygrad's workloads, as the REFIMPL device gets them, to `out` (module docstring)."""
  sys.path.insert(0, str(ROOT))
  sys.path.insert(0, str(ROOT / "bench"))
  from bench_tinygrad import KERNEL_HEAVY, WORKLOADS, refimpl_kernels

  from refimpl.ir import program_to_json
  out.mkdir(parents=True, exist_ok=True)
  for workload in {**WORKLOADS, **KERNEL_HEAVY}:
    if workload == "matmul 1024": continue
    kernels = refimpl_kernels(workload)
    for k in kernels:
      if k.program is None:
        print(f"{workload}: {k.name} does not translate: {k.error}")
        continue
      stem = f"{workload.replace(' ', '_')}__{k.name}"
      (out / f"{stem}.json").write_text(program_to_json(k.program))
      np.savez(out / f"{stem}.npz", *k.inputs, vals=np.array(k.vals, np.int64))
    print(f"{workload}: {len(kernels)} kernels")


def _cases(kernels: pathlib.Path | None, corpus: bool, only: str) -> list[tuple[str, pathlib.Path]]:
  """(name, file) of every kernel to time: DIR's programs, and the corpus's findings."""
  out = []
  if kernels is not None: out += [(p.stem, p) for p in sorted(kernels.glob("*.json"))]
  if corpus: out += [(f"{p.parent.name}/{p.stem}", p) for p in sorted((ROOT / "corpus" / "tinygrad-0.10.1").glob("*/*.json"))]
  return [(name, path) for name, path in out if only in name]


def worker(root: str, kernels: pathlib.Path | None, corpus: bool, only: str, runs: int) -> None:
  """Times every kernel on `root`'s emulator; prints one JSON object per kernel: name and best seconds, or error."""
  sys.path.insert(0, root)
  from refimpl.fuzz.corpus import load_finding
  from refimpl.ir import program_from_json
  from refimpl.runner import Kernel
  for name, path in _cases(kernels, corpus, only):
    try:
      if path.parent == kernels:
        program = program_from_json(path.read_text())
        with np.load(path.with_suffix(".npz")) as saved:
          bufs = [saved[f"arr_{k}"] for k in range(len(saved.files) - 1)]
          vals = tuple(int(v) for v in saved["vals"])
      else:
        case = load_finding(path).case
        program, bufs, vals = case.program, [b.copy() for b in case.inputs], tuple(case.vals)
      kernel = Kernel(program, "PYTHON")
      for _ in range(WARMUP): kernel(*bufs, vals=vals)
      best = math.inf
      for _ in range(runs):
        kernel(*bufs, vals=vals)
        best = min(best, kernel.last_time)
      print(json.dumps({"kernel": name, "seconds": best}), flush=True)
    except Exception as e:  # a kernel one checkout cannot run is reported, not fatal
      print(json.dumps({"kernel": name, "error": f"{type(e).__name__}: {e}"[:200]}), flush=True)


def compare(roots: list[str], kernels: pathlib.Path | None, corpus: bool, only: str, rounds: int, runs: int) -> int:
  """Times every kernel on both checkouts, alternately, and prints the table (module docstring)."""
  best: list[dict[str, float]] = [{}, {}]  # per checkout, by position (the same checkout twice is an A/A run)
  errors: dict[str, str] = {}
  start = time.perf_counter()
  for r in range(rounds):
    for side in ((0, 1) if r % 2 == 0 else (1, 0)):
      root = roots[side]
      cmd = [sys.executable, __file__, "--worker", root, "--only", only, "--runs", str(runs)]
      cmd += (["--kernels", str(kernels)] if kernels is not None else []) + (["--corpus"] if corpus else [])
      done = subprocess.run(cmd, capture_output=True, text=True)
      if done.returncode != 0:
        raise SystemExit(f"the worker on {root} failed (exit {done.returncode}):\n{done.stderr[-2000:]}")
      for line in done.stdout.splitlines():
        row = json.loads(line)
        if "error" in row: errors[row["kernel"]] = f"{root}: {row['error']}"
        else: best[side][row["kernel"]] = min(best[side].get(row["kernel"], math.inf), row["seconds"])
    print(f"round {r + 1} of {rounds} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
  a, b = best
  names = [n for n in a if n in b and n not in errors]
  if not names: raise SystemExit("no kernel ran on both checkouts" + (f": {next(iter(errors.values()))}" if errors else ""))
  print(f"A: {roots[0]}\nB: {roots[1]}\n{'kernel':60s} {'A':>10s} {'B':>10s} {'B/A':>7s}")
  for n in names: print(f"{n:60s} {a[n] * 1e3:8.3f}ms {b[n] * 1e3:8.3f}ms {b[n] / a[n]:7.3f}")
  for n, why in errors.items(): print(f"{n:60s} failed: {why}")
  ratios = [b[n] / a[n] for n in names]
  print(f"{len(names)} kernels: geometric mean of B/A {math.exp(np.mean(np.log(ratios))):.3f} (lowest {min(ratios):.3f}, "
        f"highest {max(ratios):.3f}), best of {runs} runs in each of {rounds} rounds")
  return 0


def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  ap.add_argument("roots", nargs="*", help="two checkouts of refimpl (A, then B)")
  ap.add_argument("--capture", type=pathlib.Path, help="write tinygrad's workload kernels to this folder, then stop")
  ap.add_argument("--kernels", type=pathlib.Path, help="a folder that --capture wrote")
  ap.add_argument("--corpus", action="store_true", help="also every kernel of corpus/tinygrad-0.10.1")
  ap.add_argument("--only", default="", help="only kernels whose name contains this")
  ap.add_argument("--rounds", type=int, default=4)
  ap.add_argument("--runs", type=int, default=10, help="timed runs per kernel, process and round (the best is kept)")
  ap.add_argument("--worker", help=argparse.SUPPRESS)
  args = ap.parse_args()
  if args.capture is not None:
    capture(args.capture)
    return 0
  if args.worker is not None:
    worker(args.worker, args.kernels, args.corpus, args.only, args.runs)
    return 0
  if len(args.roots) != 2: ap.error("give two checkouts, A and B")
  if args.kernels is None and not args.corpus: ap.error("give --kernels DIR (a folder --capture wrote), --corpus, or both")
  for root in args.roots:
    if not (pathlib.Path(root) / "refimpl" / "emulator").is_dir(): ap.error(f"{root} is not a checkout of refimpl")
  if args.kernels is not None and not any(args.kernels.glob("*.json")):
    ap.error(f"{args.kernels} holds no kernels: write them with --capture {args.kernels}")
  return compare([str(pathlib.Path(r).resolve()) for r in args.roots], args.kernels, args.corpus, args.only, args.rounds,
                 args.runs)


if __name__ == "__main__":
  sys.exit(main())
