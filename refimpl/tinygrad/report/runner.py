"""The conformance report of tinygrad 0.10.1's backends, the runner: `python -m refimpl.tinygrad report --out docs/conformance`.

For each backend B (CLANG, LLVM, GPU, WEBGPU, PYTHON, or any tinygrad device refimpl.tinygrad.v0_10.backend opens: the device
TINYGRAD:B) it
  1. runs the packaged conformance suite (spec_tests/test_conformance_{ops,programs,rules}.py; PYTHON: programs and rules
     only, tinygrad's per-thread Python emulator is too slow for the 65536-lane op sweeps) with --conformance-report,
     timing it; the suite report's JSON gives each op case's status and message and every failing test;
  2. runs a fuzz campaign (`python -m refimpl.fuzz --backend TINYGRAD:B --time S`) and lists its findings, deduplicated by
     signature (op, dtypes, kind). A finding is published (its file kept) only when its reduction finished (no unused
     kernel argument) and it replays, in a fresh process, as the failure it claims on its backend; refimpl's own
     UndefinedBehavior (kind refimpl-error: a harness error) is never published as a backend's finding, only counted;
  3. runs every disagreement class's reproducer (refimpl.tinygrad.report.classes) on TINYGRAD:B and on refimpl's own
     CLANG, LLVM and GPU.
Then, once for tinygrad as a whole, the three classes of what its kernels rely on (refimpl.tinygrad.report.reliance). The data
goes to tinygrad-0.10.1.json with the run's provenance (commit, date, toolchains, command); the pages
(refimpl.tinygrad.report.pages) are built from it: tinygrad-0.10.1.{html,md}, and index.html over every page of the
folder. A tinygrad device without its hardware is judged at the level refimpl.tinygrad.v0_10.standins gives it: at ran as
above (on its stand-in), below ran by building every op case to its level (run_builds; no fuzz campaign: nothing runs).
`--merge` reports the named backends into the saved data, keeping the others; `--classes-only` reruns the classes over
the saved data, `--keep-fuzz` keeps the saved campaigns (each
published finding replayed again, a stale one dropped), `--pages-only` rebuilds the pages alone. Every subprocess runs
as an argument list.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from refimpl.ir import Ops
from refimpl.testing import report_html as rh
from refimpl.testing.provenance import provenance
from refimpl.tinygrad.report import pages
from refimpl.tinygrad.report.classes import CLASSES, REFIMPL_BACKENDS, DisagreementClass, run_reproducer, safe_label, suite_report

NATIVE = ("CLANG", "LLVM", "GPU", "WEBGPU")  # tinygrad's seed devices whose own runtimes run here
BACKENDS = (*NATIVE, "PYTHON")
SUITE = ["spec_tests/test_conformance_ops.py", "spec_tests/test_conformance_programs.py",
         "spec_tests/test_conformance_rules.py"]
SUITE_FOR = {"PYTHON": SUITE[1:]}
DATA = "tinygrad-0.10.1.json"


def check_class(c: DisagreementClass, backend: str) -> tuple[bool | None, str]:
  """(fails on TINYGRAD:backend, detail); None when the device does not open."""
  from refimpl.device import Device
  name = f"TINYGRAD:{backend}"
  why = Device.open_error(name)
  if why is not None: return None, why
  return run_reproducer(c, name)


def passes_on_refimpl(c: DisagreementClass) -> str:
  """Which of refimpl's own backends run the reproducer as the spec says."""
  from refimpl.device import Device
  ok = [d for d in REFIMPL_BACKENDS if Device.open_error(d) is None and not run_reproducer(c, d)[0]]
  return ", ".join(ok) or "none"


def _suite_doc(out: Path, backend: str) -> dict:
  path = out / f"{suite_report(backend)}.json"
  return json.loads(path.read_text()) if path.exists() else {"results": []}


def case_counts(statuses: dict[str, str]) -> dict[str, int]:
  return {s: sum(1 for v in statuses.values() if v == s) for s in pages.HEADLINE_STATUSES}


def run_suite(backend: str, out: Path) -> dict:
  report = out / f"{suite_report(backend)}.md"
  files = SUITE_FOR.get(backend, SUITE)
  command = ["python", "-m", "pytest", *files, "--backend", f"TINYGRAD:{backend}", "-q", "-p", "no:cacheprovider",
             "--conformance-report", str(report), "--conformance-up", pages.INDEX]
  args = [sys.executable, *command[1:], "--conformance-command", " ".join(command)]
  t = time.perf_counter()
  res = subprocess.run(args, capture_output=True, text=True, check=False)
  wall = time.perf_counter() - t
  tail = [ln for ln in res.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
  doc = _suite_doc(out, backend)
  statuses = {case: status for _, case, status, _ in doc["results"]}
  return {"wall_s": wall, "tests": tail[-1].strip("= ") if tail else res.stdout[-300:], "cases": case_counts(statuses),
          "statuses": statuses, "details": {case: detail for _, case, _, detail in doc["results"]},
          "failed_tests": len(doc.get("failed_tests", [])), "report": report.with_suffix(".html").name, "files": files}


def level_of(backend: str) -> dict:
  """The level TINYGRAD:backend is judged at here and with what: a stand-in's (refimpl.tinygrad.v0_10.standins.STANDINS) where
  the device opened as one, else ran on tinygrad's own runtime."""
  from refimpl.device import Device
  from refimpl.tinygrad.v0_10.standins import STANDINS
  if backend in STANDINS and getattr(Device[f"TINYGRAD:{backend}"], "standin", None) is not None:
    s = STANDINS[backend]
    return {"level": s.level, "standin": s.standin, "hardware": s.hardware}
  return {"level": "ran", "standin": "tinygrad's own runtime", "hardware": ""}


def run_builds(backend: str) -> dict:
  """A device judged below ran: every op case of the suite built up to its level (refimpl.tinygrad.v0_10.standins.judge_builds:
  rendered, and compiled where it is judged at compiled), as run_suite's dict; nothing runs, so no suite report."""
  from refimpl.tinygrad.v0_10.standins import judge_builds
  t = time.perf_counter()
  got = judge_builds(f"TINYGRAD:{backend}")
  statuses = {case: status for case, (status, _) in got.items()}
  failed = sum(1 for v in statuses.values() if v == "fail")
  command = (f"python -c \"from refimpl.tinygrad.v0_10.standins import judge_builds; print(judge_builds('TINYGRAD:{backend}'))\"")
  return {"wall_s": time.perf_counter() - t, "tests": f"{len(got)} op cases built, {failed} failed", "command": command,
          "cases": case_counts(statuses), "statuses": statuses, "details": {c: rh.scrub(d) for c, (_, d) in got.items()},
          "failed_tests": failed, "report": None, "files": []}


def _kind(kind: str) -> str: return kind.replace(":", "-")


def _scrub_detail(path: Path, detail: str) -> None:
  """A published finding's message without this machine's absolute paths (the rest of the file as the fuzzer wrote it)."""
  text = path.read_text()
  clean = text.replace(json.dumps(detail), json.dumps(rh.scrub(detail)))
  if clean != text and json.loads(clean)["detail"] == rh.scrub(detail): path.write_text(clean)


class Replay(NamedTuple):
  ok: bool  # it failed with the kind it claims
  did: str  # what it did: status, kind, detail
  unsupported_here: bool  # the backend on this machine declares it cannot run the program (a capability it lacks here)


def replays_as_claimed(paths: list[Path]) -> dict[Path, Replay]:
  """Whether each published finding still fails on its backend, in a fresh isolated worker (one pool for them all),
  with the kind it claims; and what it did (the check spec_tests/test_published_pages.py makes of every committed
  finding)."""
  from refimpl.fuzz.corpus import load_finding, replay
  if not paths: return {}
  findings = [load_finding(p) for p in paths]
  out = {}
  for path, run in zip(paths, replay(findings)):
    claimed, result = json.loads(path.read_text())["signature"]["kind"], run["result"]
    did = f"{result.status} {result.kind}: {result.detail}"[:400]
    out[path] = Replay(result.status == "finding" and _kind(result.kind) == _kind(claimed), did, result.status == "unsupported")
  return out


def run_fuzz(backend: str, seconds: float, out: Path) -> dict:
  where = out / "fuzz" / safe_label(backend)
  for old in where.glob("*") if where.exists() else []: old.unlink()  # a campaign's folder holds that campaign's findings
  args = [sys.executable, "-m", "refimpl.fuzz", "--backend", f"TINYGRAD:{backend}", "--time", str(seconds), "--jobs", "1",
          "--out", str(where), "--quiet"]
  t = time.perf_counter()
  res = subprocess.run(args, capture_output=True, text=True, check=False)
  summary = [ln for ln in res.stdout.splitlines() if ln.startswith(("programs:", "  backend", "  TINYGRAD", "findings:"))]
  fuzz = {"wall_s": time.perf_counter() - t, "seconds": seconds, "summary": summary,
          "command": f"python -m refimpl.fuzz --backend TINYGRAD:{backend} --time {seconds:.0f} --jobs 1 --out "
                     f"fuzz/{safe_label(backend)} --quiet"}
  return {**fuzz, **publish_findings(backend, out)}


def publish_findings(backend: str, out: Path) -> dict:
  """The findings in out/fuzz/B/, sorted: published (reduced and replaying as claimed), harness errors (refimpl's own
  UndefinedBehavior, not the backend's: file removed) and stale or unreduced ones (file removed); each listed."""
  where = out / "fuzz" / safe_label(backend)
  for stale in where.glob("test_*.py") if where.exists() else []: stale.unlink()  # JSON replays (fuzz replay)
  findings, dropped = [], []
  files = sorted(where.glob("*.json")) if where.exists() else []
  harness = {f for f in files if _kind(json.loads(f.read_text()).get("signature", {}).get("kind", "")) == "refimpl-error"}
  replayed = replays_as_claimed([f for f in files if f not in harness and fully_reduced(f)])
  for f in files:
    doc = json.loads(f.read_text())
    entry = {**doc.get("signature", {}), "detail": rh.scrub(str(doc.get("detail", "")))}
    if f in harness:
      why = "a harness error (refimpl's own UndefinedBehavior), not the backend's"
    elif f not in replayed: why = "the reducer stopped early (not published)"
    else:
      ok, did, _ = replayed[f]
      why = None if ok else f"does not replay as claimed now ({did})"
    if why is None:
      _scrub_detail(f, str(doc.get("detail", "")))
      findings.append({**entry, "file": f"fuzz/{safe_label(backend)}/{f.name}"})
    else:
      f.unlink()
      dropped.append({**entry, "file": None, "why": why})
  return {"findings": findings, "dropped": dropped}


def fully_reduced(path: Path) -> bool:
  """Whether a finding's program takes no kernel argument that nothing uses (the reducer's last pass ran): only such
  reproducers are published (what spec_tests/test_fuzz_corpus.py holds every committed reproducer to)."""
  from refimpl.fuzz.corpus import load_finding
  from refimpl.fuzz.edits import unused_declarations
  from refimpl.fuzz.graph import Graph
  graph = Graph.from_program(load_finding(path).case.program)
  return not [n for n in unused_declarations(graph) if n.op is not Ops.DEFINE_LOCAL]


def unsupported_dtypes(backend: str) -> dict[str, str]:
  """dtype -> why TINYGRAD:backend refuses it (its probe), for every value dtype of the spec."""
  from refimpl import spec
  from refimpl.device import Device
  dev = Device[f"TINYGRAD:{backend}"]
  return {spec.short_name(d): dev.unsupported_reasons.get(d, "") for d in spec.VALUE_DTYPES if not dev.supports_dtype(d)}


def reliance_results(out: Path | None = None) -> dict:
  """refimpl.tinygrad.report.reliance's classes over what this machine captures (the REFIMPL device, tinygrad's CLANG); with
  `out`, each kernel's reproducer saved under out/reliance/."""
  from refimpl.tinygrad.report.reliance import report_classes
  from refimpl.tinygrad.v0_10.reference import install_reference_device
  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  return report_classes(install_reference_device(), prepare_tinygrad()["CLANG"] is None, out)


def _classes(results: dict) -> None:
  for b, r in results.items():
    if not b.startswith("_") and r.get("suite"): r["classes"] = {c.id: check_class(c, b) for c in CLASSES}
  results["_refimpl"] = {c.id: passes_on_refimpl(c) for c in CLASSES}


def superseded(history: list[dict], backends: list[str]) -> list[dict]:
  """The --merge history without the backends reported again now (their rows are replaced); runs left empty dropped."""
  kept = [{**m, "backends": [b for b in m["backends"] if b not in backends]} for m in history]
  return [m for m in kept if m["backends"]]


def load(out: Path) -> dict:
  return json.loads((out / DATA).read_text())


def save(out: Path, doc: dict) -> None:
  (out / DATA).write_text(json.dumps(doc, indent=1) + "\n")
  written = pages.write(out, doc)
  print(f"refimpl.tinygrad report: wrote {out / DATA} and {', '.join(str(p) for p in written)}", file=sys.stderr)


def rerun_classes(out: Path, command: str) -> int:
  """Reruns every class's reproducer and the reliance classes over the saved data, and rewrites the pages; the suites
  and fuzz campaigns are not rerun (`report --classes-only`)."""
  doc = load(out)
  _classes(doc["results"])
  doc["results"]["_reliance"] = reliance_results(out)
  doc["classes_provenance"] = provenance(command)
  save(out, doc)
  return 0


def rebuild_pages(out: Path) -> int:
  """The pages again from the saved data (`report --pages-only`): each suite report's from its JSON, then the report's
  and the index; nothing is rerun."""
  from refimpl.testing.pytest_plugin import rewrite_report
  doc = load(out)
  for b, r in doc["results"].items():
    if not b.startswith("_") and r.get("suite", {}).get("report"):
      rewrite_report(out / f"{suite_report(b)}.json", pages.INDEX)
  save(out, doc)
  return 0


def main(out: Path, backends: list[str], fuzz_seconds: float, command: str, keep_fuzz: bool = False,
         merge: bool = False) -> int:
  """The report of `backends` (module docstring); with `merge`, the saved report's other backends are kept as they were
  (their suites and campaigns not rerun; every class reruns on all of them)."""
  from refimpl.device import Device
  out.mkdir(parents=True, exist_ok=True)
  saved_doc = load(out) if (keep_fuzz or merge) and (out / DATA).exists() else {"results": {}}
  saved = saved_doc["results"]
  results: dict = {b: r for b, r in saved.items() if not b.startswith("_") and b not in backends} if merge else {}
  for b in backends:
    why = Device.open_error(f"TINYGRAD:{b}")
    if why is not None:
      results[b] = {"why": rh.scrub(why)}
      continue
    level = level_of(b)
    print(f"refimpl.tinygrad report: TINYGRAD:{b}: suite ({level['level']})", file=sys.stderr, flush=True)
    suite = run_suite(b, out) if level["level"] == "ran" else run_builds(b)
    results[b] = {"suite": suite, "unsupported": unsupported_dtypes(b), "level": level}
    if keep_fuzz and saved.get(b, {}).get("fuzz"):
      print(f"refimpl.tinygrad report: TINYGRAD:{b}: the saved fuzz campaign, its findings replayed", file=sys.stderr)
      results[b]["fuzz"] = {**saved[b]["fuzz"], **publish_findings(b, out), "kept": True}
    elif fuzz_seconds > 0 and level["level"] == "ran":
      print(f"refimpl.tinygrad report: TINYGRAD:{b}: fuzz {fuzz_seconds:.0f} s", file=sys.stderr, flush=True)
      results[b]["fuzz"] = run_fuzz(b, fuzz_seconds, out)
  _classes(results)
  results["_reliance"] = saved["_reliance"] if merge and "_reliance" in saved else reliance_results(out)
  doc = {"provenance": provenance(command), "fuzz_seconds": fuzz_seconds, "results": results}
  if merge and saved_doc.get("provenance"):
    history = [*superseded(saved_doc.get("merged", []), backends), {"backends": backends, "fuzz_seconds": fuzz_seconds,
                                                                    "provenance": provenance(command)}]
    doc = {**saved_doc, "results": results, "merged": history}
  save(out, doc)
  return 0
