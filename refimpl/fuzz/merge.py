"""Merging the findings of many shards (`python -m refimpl.fuzz merge DIR... --out DIR`): the shards of one campaign
(`--shard K/N`, each run by any batch scheduler: a Slurm array job, a Kubernetes indexed Job) each write a folder of
finding files; the merge makes the one folder an unsharded campaign would have made.

  - findings are deduplicated by signature (finding.py: one signature, one bug);
  - of one signature's files the smallest reproducer is kept: the fewest uops, then a reduced one, then the first in the
    order the folders were given (files by name within a folder);
  - its `seen` is the sum of every file's `seen` (how often the shards met the bug).

Every file is read with load_finding, so a corrupt one stops the merge with CaseFormatError naming it, before anything
is written. --out may be one of the folders merged (the merge then replaces its files); otherwise it must hold no
finding file, since merging twice into one folder would count every occurrence twice.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from refimpl.fuzz.finding import Finding, Signature, load_finding, remove_finding, save_finding


class MergeError(ValueError):
  """The folders cannot be merged as asked (a folder missing or given twice, --out already holding findings)."""


@dataclass
class Merged:
  """One signature of a merge: the finding kept (its `seen` summed), where it was written, and how many files had it."""
  finding: Finding
  path: Path
  files: int


def _smallest(group: list[tuple[Path, Finding]]) -> Finding:
  return min(group, key=lambda pf: (len(pf[1].case.program.uops), not pf[1].reduced))[1]


def merge(folders: list[str | os.PathLike], out: str | os.PathLike) -> list[Merged]:
  """Merges the finding files (*.json) of `folders` into `out` (see the module docstring); one Merged per signature."""
  dirs, out = [Path(d) for d in folders], Path(out)
  for d in dirs:
    if not d.is_dir(): raise MergeError(f"{d}: not a folder")
  seen_dirs = [d.resolve() for d in dirs]
  twice = next((d for k, d in enumerate(dirs) if seen_dirs[k] in seen_dirs[:k]), None)
  if twice is not None: raise MergeError(f"{twice}: given twice (its findings would be counted twice)")
  if out.is_dir() and out.resolve() not in seen_dirs and any(out.glob("*.json")):
    raise MergeError(f"--out {out} already holds findings: name it among the folders to merge into it")
  groups: dict[Signature, list[tuple[Path, Finding]]] = {}
  for d in dirs:
    for p in sorted(d.glob("*.json")):
      f = load_finding(p)
      groups.setdefault(f.signature, []).append((p, f))
  merged = []
  for group in groups.values():
    best = _smallest(group)
    best.seen = sum(f.seen for _, f in group)
    merged.append(Merged(best, save_finding(out, best), len(group)))
  written = {m.path.resolve() for m in merged}
  for group in groups.values():  # the files of --out that a merged one replaces under another name
    for p, _ in group:
      if p.parent.resolve() == out.resolve() and p.resolve() not in written: remove_finding(p)
  return merged
