"""python -m refimpl.sweep: every float32 input of unary float ops and float32 conversions, on backends, in chunks.

  python -m refimpl.sweep --backend CLANG,LLVM,GPU,WEBGPU --out DIR [--ops EXP2,SQRT,CAST-f32-to-i32 ...]
                          [--chunk-bits 20] [--range START:STOP] [--jobs J] [--cluster local|local:N|ADDRESS]
                          [--timeout SECONDS] [--quiet]
  python -m refimpl.sweep report SOURCE... [--out docs/conformance] [--name float32-sweeps]

The first form runs (or resumes) the sweep into DIR, one JSON file per finished chunk; the second writes the tables
(NAME.md, NAME.html, NAME.json) of what the sources hold: sweep directories, or an earlier report's NAME.json (each
case and backend from the source with the most chunks of it; refimpl/sweep/report.py). Exit status: 0 when every
chunk run agrees with the spec, 1 when some backend broke it or a chunk could not be run, 2 on a usage error, 130
after Ctrl-C or SIGTERM (finished chunks are kept: run the same command to go on).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from refimpl.fuzz.execute import BackendRef
from refimpl.sweep import plan, report, schedule, store
from refimpl.workers.cluster import ClusterError, open_pool


def run_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="python -m refimpl.sweep", description=__doc__.split("\n")[0])
  ap.add_argument("--backend", action="append", required=True, help="a device name or module:Class (repeat or comma-separate)")
  ap.add_argument("--out", type=Path, required=True, help="the sweep directory (made if missing; resumed if not)")
  ap.add_argument("--ops", action="append", default=[], help="ops or case ids (default: every case, plan.sweep_cases)")
  ap.add_argument("--chunk-bits", type=int, default=20, help="2^N inputs per chunk (default 20)")
  ap.add_argument("--range", default="0:0x100000000", help="only the bit patterns START:STOP (default: all 2^32)")
  ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="worker processes (default: the CPU count)")
  ap.add_argument("--cluster", metavar="ADDRESS", help="run chunks as Dask tasks: local, local:N, a scheduler address "
                  "(tcp://host:8786) or a scheduler file")
  ap.add_argument("--timeout", type=float, default=schedule.SWEEP_LIMITS["run"],
                  help="seconds one backend may take on one chunk before it counts as hung (default %(default).0f)")
  ap.add_argument("--quiet", action="store_true", help="no progress: the summary only")
  return ap

def report_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="python -m refimpl.sweep report", description="the tables of sweep directories")
  ap.add_argument("sources", type=Path, nargs="+", metavar="SOURCE",
                  help="a sweep directory or an earlier report's NAME.json (several: combined, later ones win ties)")
  ap.add_argument("--out", type=Path, default=Path("docs/conformance"), help="where the tables go (default docs/conformance)")
  ap.add_argument("--name", default="float32-sweeps", help="file name stem (default float32-sweeps)")
  return ap

def _split(values: list[str]) -> list[str]: return [v.strip() for x in values for v in x.split(",") if v.strip()]

def main_run(argv: list[str]) -> int:
  args = run_parser().parse_args(argv)
  if not 1 <= args.chunk_bits <= 24: return _usage(f"--chunk-bits {args.chunk_bits}: give 1 .. 24")
  if args.jobs < 1: return _usage(f"--jobs {args.jobs}: give at least 1")
  if not args.timeout > 0: return _usage(f"--timeout {args.timeout}: give a positive number of seconds")
  try:
    cases = plan.select(_split(args.ops))
    lo, hi = plan.parse_range(args.range, args.chunk_bits)
    refs = [BackendRef.parse(b) for b in _split(args.backend)]
    store.open_dir(args.out, args.chunk_bits)
  except (ValueError, ImportError, store.StoreError, OSError) as e: return _usage(str(e))
  backends = tuple((r.name, r.spec) for r in refs)
  say = (lambda text: None) if args.quiet else _say
  tasks, done = schedule.plan_tasks(args.out, cases, args.chunk_bits, lo, hi, backends, _say)  # corrupt files: always said
  total = done + len(tasks)
  say(f"[sweep] {len(cases)} cases x {len(refs)} backends ({', '.join(r.name for r in refs)}), {total} chunks of "
      f"2^{args.chunk_bits} inputs: {done} done, {len(tasks)} to run, into {args.out}")
  remaining = {c.id: 0 for c in cases}
  for t in tasks: remaining[t.chunk.case] += 1
  try: pool = open_pool(schedule.SweepWork(), args.jobs, {"run": args.timeout}, cluster=args.cluster)
  except (ImportError, ClusterError, OSError, ValueError) as e: return _usage(str(e))
  signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` stops it as Ctrl-C does: finished chunks are all on disk
  signal.signal(signal.SIGINT, _interrupt)  # Ctrl-C stops it even when started with SIGINT ignored (Python then has no handler)
  t0 = time.monotonic()
  progress = schedule.ChunkProgress(total, done, remaining, args.quiet)
  outcome = schedule.run_tasks(tasks, pool, args.out, progress)
  what = "interrupted" if outcome.interrupted else "finished"
  _say(f"\n[sweep] {what} after {time.monotonic() - t0:.0f} s: {len(outcome.written)} chunks written this run, "
      f"{progress.done}/{total} done in {args.out}")
  for case, backend in sorted(outcome.failing): _say(f"[sweep] {backend} breaks the spec on {case}")
  for text in outcome.errors[:10]: _say(f"[sweep] not run (a rerun tries again): {text}")
  if len(outcome.errors) > 10: _say(f"[sweep] ... and {len(outcome.errors) - 10} more chunks not run")
  if outcome.interrupted: return 130
  return 1 if outcome.failing or outcome.errors else 0

def main_report(argv: list[str]) -> int:
  args = report_parser().parse_args(argv)
  try: paths = report.publish(args.sources, args.out, args.name)
  except (store.StoreError, OSError) as e: return _usage(str(e))
  for p in paths: print(p)
  return 0

def _interrupt(signum, frame) -> None: raise KeyboardInterrupt

def _say(text: str) -> None: print(text, file=sys.stderr, flush=True)

def _usage(text: str) -> int:
  print(f"python -m refimpl.sweep: error: {text}", file=sys.stderr)
  return 2

def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  return main_report(argv[1:]) if argv[:1] == ["report"] else main_run(argv)

if __name__ == "__main__":
  sys.exit(main())
