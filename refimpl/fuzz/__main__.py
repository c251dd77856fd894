"""The fuzzer's command line (see refimpl/fuzz/__init__.py):

  python -m refimpl.fuzz [--time S] [--iterations N] [--seed S] [--backend NAME|module:Class ...] [--jobs J]
                         [--out DIR] [--shard K/N] [--quiet] [--batch B] [--timeout S] [--no-reduce] [--no-recheck]
                         [--baseline NAME]
                         [--reduce-time S] [--reduce-candidates N]
                         [--max-steps N] [--mode random|tinygrad|corpus|mix] [--cluster local|local:N|ADDRESS|FILE]
  python -m refimpl.fuzz replay FILE... [--backend NAME ...]
  python -m refimpl.fuzz merge DIR... --out DIR

Exit status: 1 when the campaign found something (or a replayed case still fails), 0 when not (a merge: 0 once merged),
2 on a usage error or an unreadable finding file.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from refimpl.device import DeviceUnavailable
from refimpl.fuzz.campaign import run_campaign
from refimpl.fuzz.config import Config
from refimpl.fuzz.corpus import CaseFormatError, load_finding, replay
from refimpl.fuzz.execute import BackendRef
from refimpl.fuzz.generate import MODES
from refimpl.fuzz.merge import MergeError, merge
from refimpl.fuzz.reduce import MAX_CANDIDATES
from refimpl.workers.cluster import ClusterError


def _shard(text: str) -> tuple[int, int]:
  try:
    k, n = (int(x) for x in text.split("/"))
  except ValueError: raise argparse.ArgumentTypeError(f"expected K/N, e.g. 2/8, got {text!r}") from None
  if not 1 <= k <= n: raise argparse.ArgumentTypeError(f"shard K/N needs 1 <= K <= N, got {text!r}")
  return k, n

def _positive(kind):
  def parse(text: str):
    v = kind(text)
    if v <= 0: raise argparse.ArgumentTypeError(f"must be positive, got {text!r}")
    return v
  return parse

def _backends(values: list[str] | None) -> list[str] | None:
  if not values: return None
  return [b for v in values for b in v.split(",") if b]


def campaign_parser() -> argparse.ArgumentParser:
  ap = argparse.ArgumentParser(prog="python -m refimpl.fuzz", description="Random whole-program differential fuzzing of "
                               "every backend against the emulator. `python -m refimpl.fuzz replay FILE` reruns a finding.")
  ap.add_argument("--time", type=_positive(float), help="stop starting programs after this many seconds")
  ap.add_argument("--iterations", type=_positive(int), help="programs 0..N-1 of the campaign (this shard's share)")
  ap.add_argument("--seed", type=int, default=0, help="campaign seed: program i is a function of (seed, i) (default 0)")
  ap.add_argument("--backend", action="append", help="a device name or module:Class; repeat or comma-separate "
                  "(default: every device that opens, the PYTHON emulator being the reference)")
  ap.add_argument("--jobs", type=_positive(int), default=os.cpu_count() or 1, help="worker processes (default: CPU count)")
  ap.add_argument("--cluster", metavar="WHERE", help="run the jobs on a Dask cluster: 'local' (a local cluster of --jobs "
                  "worker processes), 'local:N', a scheduler address (tcp://host:8786) or a scheduler file; needs "
                  "pip install 'refimpl[cluster]' (docs/fuzzing.md, \"Campaigns on a cluster\")")
  ap.add_argument("--out", type=Path, default=Path("fuzz-findings"), help="where findings go (default fuzz-findings/)")
  ap.add_argument("--shard", type=_shard, default=(1, 1), help="K/N: run only indices i with i %% N == K-1 (1-based)")
  ap.add_argument("--quiet", action="store_true", help="no progress display, no per-finding lines; the summary only")
  ap.add_argument("--batch", type=_positive(int), default=16, help="programs per worker job (one compiler call each)")
  ap.add_argument("--timeout", type=_positive(float), default=10.0, help="seconds a kernel may run before it is a hang")
  ap.add_argument("--compile-timeout", type=_positive(float), default=60.0,
                  help="seconds a compile (a batch, then one kernel) may take before it is a hang")
  ap.add_argument("--no-reduce", action="store_true", help="save findings as found, without reducing them")
  ap.add_argument("--baseline", metavar="NAME", help="a device the backends derive from: a failure it shows on the "
                  "same case, with the same bits, is counted 'as baseline', not as a finding")
  ap.add_argument("--no-recheck", action="store_true",
                  help="count findings without replaying each alone in a fresh process first (docs/fuzzing.md)")
  ap.add_argument("--reduce-time", type=_positive(float), default=60.0,
                  help="seconds of reduction per finding at most (default 60)")
  ap.add_argument("--reduce-candidates", type=_positive(int), default=MAX_CANDIDATES,
                  help=f"candidates one reduction may try at most (default {MAX_CANDIDATES}; the same on every machine)")
  ap.add_argument("--max-steps", type=_positive(int), default=24, help="generator steps per program at most")
  ap.add_argument("--mode", choices=(*MODES, "mix"), default="mix",
                  help="random: random kernels; tinygrad: kernels shaped like tinygrad's (upcast vectors, reductions, "
                       "local reductions, gated stencils, vars); corpus: mutated kernels of corpus/tinygrad-0.10.1; "
                       "mix: each program's mode drawn by (seed, index) (default)")
  return ap


def replay_main(argv: list[str]) -> int:
  ap = argparse.ArgumentParser(prog="python -m refimpl.fuzz replay", description="Rerun saved findings (on their own "
                               "backend, or on each --backend) and say whether each still breaks the spec.")
  ap.add_argument("files", nargs="+", type=Path)
  ap.add_argument("--backend", action="append")
  ap.add_argument("--timeout", type=_positive(float), default=10.0)
  args = ap.parse_args(argv)
  findings = [load_finding(p) for p in args.files]
  refs = [BackendRef.parse(b) for b in _backends(args.backend) or []] or None
  failing = 0
  path_of = {id(f): p for p, f in zip(args.files, findings)}
  for run in replay(findings, refs, timeout=args.timeout):
    path, r = path_of[id(run["finding"])], run["result"]
    if r.status == "ok": what = "passes (agrees with the spec)"
    elif r.status == "finding":
      failing += 1
      what = f"FAILS: {r.kind}: {r.detail}"
    elif r.status == "unsupported": what = f"not run: the backend does not support it ({r.detail})"
    else: what = f"not run: undefined under the current spec ({r.detail})"
    print(f"{path} on {run['backend']}: {what}")
  return 1 if failing else 0


def merge_main(argv: list[str]) -> int:
  ap = argparse.ArgumentParser(prog="python -m refimpl.fuzz merge", description="Combine the findings of many shards "
                               "(--shard K/N, run by any batch scheduler) into one folder: deduplicated by signature, the "
                               "smallest reproducer kept, the counts (seen) summed.")
  ap.add_argument("folders", nargs="+", type=Path, help="the shards' --out folders")
  ap.add_argument("--out", type=Path, required=True, help="where the merged findings go (empty, or one of the folders)")
  args = ap.parse_args(argv)
  merged = merge(args.folders, args.out)
  for m in merged:
    f = m.finding
    print(f"  {f.signature}  ({len(f.case.program.uops)} uops, seen {f.seen}, in {m.files} file(s))  {m.path}")
  files = sum(m.files for m in merged)
  print(f"merged {files} finding file(s) of {len(args.folders)} folder(s): {len(merged)} signature(s) in {args.out}")
  return 0


def main(argv: list[str] | None = None) -> int:
  argv = sys.argv[1:] if argv is None else argv
  try:
    if argv[:1] == ["replay"]: return replay_main(argv[1:])
    if argv[:1] == ["merge"]: return merge_main(argv[1:])
    args = campaign_parser().parse_args(argv)
    cfg = Config(seed=args.seed, iterations=args.iterations, time=args.time, backends=_backends(args.backend),
                 jobs=args.jobs, out=args.out, shard=args.shard, quiet=args.quiet, batch=args.batch, timeout=args.timeout,
                 compile_timeout=args.compile_timeout,
                 reduce=not args.no_reduce, recheck=not args.no_recheck, reduce_time=args.reduce_time,
                 reduce_candidates=args.reduce_candidates, max_steps=args.max_steps, mode=args.mode,
                 cluster=args.cluster, baseline=args.baseline)
    summary = run_campaign(cfg)
  # an unreadable finding file; a module:Class backend that does not import; --cluster without Dask, or unreachable;
  # merge folders that cannot be merged
  except (CaseFormatError, ImportError, ClusterError, MergeError, DeviceUnavailable) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  print(summary.render())
  if summary.unavailable and cfg.backends:  # a backend asked for by name that does not open is a usage error
    print(f"error: backend(s) not available: {', '.join(summary.unavailable)}", file=sys.stderr)
    return 2
  return summary.exit_code


if __name__ == "__main__":
  sys.exit(main())
