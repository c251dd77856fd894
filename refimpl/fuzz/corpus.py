"""The corpus of finding files (fuzz/corpus/) and replaying findings in isolated workers (`replay`, and
`assert_case_passes` for the pytest file beside each finding). The file format, with writing and loading, is
refimpl/fuzz/finding.py; its names are exported here too (the pytest files and older callers import them from here).
"""
from __future__ import annotations

import os
from pathlib import Path

from refimpl.emulator.machine import emulate
from refimpl.fuzz.case import prepare
from refimpl.fuzz.execute import BackendRef
from refimpl.fuzz.finding import (
  FORMAT,
  KEYS,
  VERSION,
  CaseFormatError,
  Finding,
  Signature,
  atomic_write,
  finding_to_json,
  load_finding,
  pytest_text,
  remove_finding,
  save_finding,
)
from refimpl.fuzz.isolate import EMULATOR, OK, UNSUPPORTED_STATUS, FuzzWork, Item, Result, run_items
from refimpl.workers.local import Pool

__all__ = ["CORPUS_DIR", "FORMAT", "KEYS", "VERSION", "CaseFormatError", "Finding", "Signature", "assert_case_passes",
           "atomic_write", "corpus_files", "finding_to_json", "load_finding", "pytest_text", "remove_finding", "replay",
           "save_finding"]

CORPUS_DIR = Path(__file__).resolve().parents[2] / "fuzz" / "corpus"


def corpus_files(folder: str | os.PathLike = CORPUS_DIR) -> list[Path]:
  return sorted(Path(folder).glob("*.json"))


# ***** replaying *****

def replay(findings: list[Finding], backends: list[BackendRef] | None = None, jobs: int = 1,
           timeout: float = 10.0) -> list[dict]:
  """Runs each finding's case on its own backend (or on each of `backends`), in isolated workers.
  Returns one {finding, backend, result} per run; result is an isolate.Result (status ok / finding / unsupported /
  discarded). A finding against the emulator (backend PYTHON) is rerun on the emulator alone."""
  refs: dict[str, BackendRef] = {}
  for f in findings:
    for r in backends or [f.backend]:
      if r.name != EMULATOR: refs.setdefault(r.name, r)
  items = []
  for k, f in enumerate(findings):
    names = tuple(r.name for r in (backends or [f.backend]) if r.name != EMULATOR)
    items.append(Item(k, names, case=f.case))
  if refs:
    with Pool(FuzzWork(tuple(refs.values())), jobs, {"run": timeout}, silent=True) as pool:
      results = run_items(pool, items)
      open_errors = dict(pool.open_errors)
  else:  # the emulator alone: no native code runs, so no worker is needed; it says whether the case is undefined
    open_errors, results = {}, {}
    for it in items:
      p = prepare(it.case)
      events = [] if p.error is not None else emulate(it.case.program, it.case.inputs, it.case.vals, strict=False).events
      if p.error is not None: results[(it.key, EMULATOR)] = Result(it.key, EMULATOR, "finding", "emulator-error", p.error)
      elif p.discard is not None: results[(it.key, None)] = Result(it.key, None, "discarded", "", p.discard)
      elif events: results[(it.key, None)] = Result(it.key, None, "discarded", "", str(events[0]))
  out = []
  for k, (f, it) in enumerate(zip(findings, items)):
    about_case = results.get((k, None)) or results.get((k, EMULATOR))
    if not it.backends: out.append({"finding": f, "backend": EMULATOR, "result": about_case or Result(k, EMULATOR, OK)})
    for name in it.backends:
      r = results.get((k, name)) or about_case
      if r is None and name in open_errors: r = Result(k, name, UNSUPPORTED_STATUS, "", open_errors[name])
      out.append({"finding": f, "backend": name, "result": r or Result(k, name, OK)})
  return out

def assert_case_passes(path: str | os.PathLike, backends: list[BackendRef] | None = None) -> None:
  """For the pytest files beside findings: the case runs on its backend (in an isolated worker) and agrees with the
  spec. Fails when it still breaks the spec, when the backend no longer runs it, or when the spec now calls it undefined."""
  f = load_finding(path)
  for run in replay([f], backends):
    r = run["result"]
    assert r.status == "ok", f"{path}: {run['backend']}: {r.status} {r.kind}: {r.detail}"
