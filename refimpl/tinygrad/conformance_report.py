"""The conformance report of tinygrad 0.10.1's own backends: `python -m refimpl.tinygrad report --out docs/conformance`.

For each backend B of CLANG, LLVM, GPU, PYTHON (the device TINYGRAD:B, refimpl.tinygrad.backend) it
  1. runs the packaged conformance suite (spec_tests/test_conformance_{ops,programs,rules}.py; PYTHON: programs and rules
     only, tinygrad's per-thread Python emulator is too slow for the 65536-lane op sweeps) with --conformance-report,
     timing it, and counts pass / fail / unsupported cases from the report's table;
  2. runs a fuzz campaign (`python -m refimpl.fuzz --backend TINYGRAD:B --time S`) and lists its findings, deduplicated by
     signature (op, dtypes, kind);
  3. runs every disagreement class's shrunk reproducer (CLASSES) on TINYGRAD:B and on refimpl's own CLANG (PYTHON for
     the spec), and records whether it fails there and passes on refimpl's backend.
It writes tinygrad-0.10.1.md and tinygrad-0.10.1.html in the output folder (and each backend's suite report beside them).
Every subprocess runs as an argument list.
"""
from __future__ import annotations

import html
import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refimpl.dtype import dtypes
from refimpl.ir import Ops, Program, ProgramBuilder

BACKENDS = ("CLANG", "LLVM", "GPU", "PYTHON")
SUITE = ["spec_tests/test_conformance_ops.py", "spec_tests/test_conformance_programs.py",
         "spec_tests/test_conformance_rules.py"]
SUITE_FOR = {"PYTHON": SUITE[1:]}
F32 = dtypes.float32


def _binary(name: str, build: Callable, inputs: list[np.ndarray]) -> tuple[Program, list[np.ndarray]]:
  b = ProgramBuilder(name)
  bufs = [b.global_buf(_dt(x), 4) for x in inputs]
  i = b.gidx(0, 4)
  b.store(bufs[0], i, build(b, [b.load(x, i) for x in bufs[1:]]))
  return b.build(), inputs


def _dt(a: np.ndarray):
  return {np.dtype(np.float32): F32, np.dtype(np.int32): dtypes.int32}[a.dtype]


def _mul_add():
  one = np.float32(1 + 2**-12)
  return _binary("mul_add", lambda b, v: b.alu(Ops.ADD, b.alu(Ops.MUL, v[0], v[1]), v[2]),
                 [np.zeros(4, np.float32), np.full(4, one), np.full(4, one), np.full(4, -(1 + 2**-11), np.float32)])


def _add_nested():
  return _binary("add_nested", lambda b, v: b.alu(Ops.ADD, v[0], b.alu(Ops.ADD, v[1], v[2])),
                 [np.zeros(4, np.float32), np.ones(4, np.float32), np.full(4, 2**-24, np.float32),
                  np.full(4, 2**-24, np.float32)])


def _max_nan():
  return _binary("max_nan", lambda b, v: b.alu(Ops.MAX, v[0], v[1]),
                 [np.zeros(4, np.float32), np.array([1, np.nan, 2, -3], np.float32),
                  np.array([np.nan, 1, np.nan, np.nan], np.float32)])


def _cmplt_nan():
  b = ProgramBuilder("cmplt_nan")
  out, x, y = b.global_buf(dtypes.bool, 4), b.global_buf(F32, 4), b.global_buf(F32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.CMPLT, b.load(x, i), b.load(y, i)))
  return b.build(), [np.zeros(4, np.bool_), np.array([np.nan, 1, np.nan, 1], np.float32),
                     np.array([1, np.nan, np.nan, 2], np.float32)]


@dataclass(frozen=True)
class DisagreementClass:
  id: str
  backends: tuple[str, ...]
  what: str
  rule: str
  reproducer: Callable[[], tuple[Program, list[np.ndarray]]]


CLASSES = [
  DisagreementClass("contraction-mul-add-f32", ("CLANG", "GPU"),
                    "a MUL feeding an ADD is fused into one FMA: tinygrad's clang flags have no -ffp-contract=off and "
                    "the C renderer inlines a*b into the ADD (OpenCL contracts too)",
                    "SPEC.md, arith: ADD and MUL round once each (exact); MULACC is the only op that may fuse", _mul_add),
  DisagreementClass("reassociation-add-f32", ("CLANG", "GPU"),
                    "the C-style renderer strips the parens of a nested ADD: a+(b+c) is rendered a+b+c, which C evaluates "
                    "as (a+b)+c", "SPEC.md, arith: each ADD rounds once, in the program's order", _add_nested),
  DisagreementClass("max-nan-f32", ("CLANG", "LLVM", "GPU", "PYTHON"),
                    "MAX is rendered (a<b)?b:a (tinygrad's extra_matcher), which drops a NaN in b (LLVM: fcmp ult, "
                    "true on NaN, drops a NaN in a instead)",
                    "SPEC.md, maximum: NaN when either operand is NaN", _max_nan),
  DisagreementClass("cmplt-nan-f32", ("LLVM",), "CMPLT is rendered `fcmp ult` (unordered: true when an operand is NaN)",
                    "SPEC.md, compare: a comparison with NaN is false (CMPLT)", _cmplt_nan),
]


def check_class(c: DisagreementClass, backend: str) -> tuple[bool | None, str]:
  """(fails on TINYGRAD:backend, detail); None when the device does not open."""
  from refimpl.device import Device
  from refimpl.emulator.machine import emulate
  from refimpl.runner import Kernel
  from refimpl.testing.compare import same_value
  name = f"TINYGRAD:{backend}"
  if (why := Device.open_error(name)) is not None: return None, why
  program, inputs = c.reproducer()
  want = emulate(program, inputs).buffers[0]
  try: got = Kernel(program, name)(*[a.copy() for a in inputs])[0]
  except Exception as e: return True, f"{type(e).__name__}: {e}"[:200]
  bad = ~same_value(got, want)
  return bool(bad.any()), f"got {got.tolist()}, the spec gives {want.tolist()}"


def passes_on_refimpl(c: DisagreementClass) -> str:
  """Which of refimpl's own backends run the reproducer as the spec says."""
  from refimpl.device import Device
  from refimpl.emulator.machine import emulate
  from refimpl.runner import Kernel
  from refimpl.testing.compare import same_value
  program, inputs = c.reproducer()
  want = emulate(program, inputs).buffers[0]
  ok = [d for d in ("CLANG", "LLVM", "GPU") if Device.open_error(d) is None
        and same_value(Kernel(program, d)(*[a.copy() for a in inputs])[0], want).all()]
  return ", ".join(ok) or "none"


def _counts(report: Path) -> dict[str, int]:
  """pass / fail / unsupported / relaxed cells of a suite report's case table."""
  counts = {"pass": 0, "fail": 0, "unsupported": 0, "relaxed": 0}
  if not report.exists(): return counts
  for line in report.read_text().splitlines():
    m = re.match(r"\| [A-Z0-9_]+-\S+ \| (\S+) \|$", line)
    if m:
      status = "fail" if m.group(1) == "**FAIL**" else m.group(1)
      counts[status] = counts.get(status, 0) + 1
  return counts


def run_suite(backend: str, out: Path) -> dict:
  report = out / f"tinygrad-0.10.1-{backend}-suite.md"
  args = [sys.executable, "-m", "pytest", *SUITE_FOR.get(backend, SUITE), "--backend", f"TINYGRAD:{backend}", "-q",
          "-p", "no:cacheprovider", "--conformance-report", str(report)]
  t = time.perf_counter()
  res = subprocess.run(args, capture_output=True, text=True, check=False)
  wall = time.perf_counter() - t
  tail = [ln for ln in res.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
  return {"wall_s": wall, "tests": tail[-1].strip("= ") if tail else res.stdout[-300:], "cases": _counts(report),
          "report": report.name, "files": SUITE_FOR.get(backend, SUITE)}


def run_fuzz(backend: str, seconds: float, out: Path) -> dict:
  where = out / "fuzz" / backend
  args = [sys.executable, "-m", "refimpl.fuzz", "--backend", f"TINYGRAD:{backend}", "--time", str(seconds), "--jobs", "1",
          "--out", str(where), "--quiet"]
  t = time.perf_counter()
  res = subprocess.run(args, capture_output=True, text=True, check=False)
  findings = []
  for stale in where.glob("test_*.py") if where.exists() else []: stale.unlink()  # JSON replays (fuzz replay)
  for f in sorted(where.glob("*.json")) if where.exists() else []:
    doc = json.loads(f.read_text())
    detail = str(doc.get("detail", ""))
    findings.append({**doc.get("signature", {}), "file": f.name, "detail": " ".join(detail.split())[:300]})
  summary = [ln for ln in res.stdout.splitlines() if ln.startswith(("programs:", "  TINYGRAD"))]
  return {"wall_s": time.perf_counter() - t, "findings": findings, "summary": summary}


def write(out: Path, results: dict, fuzz_seconds: float, command: str) -> Path:
  lines = ["# tinygrad 0.10.1's backends against the spec", "",
           "Generated by `" + command + "` (refimpl.tinygrad.conformance_report). Each backend is the refimpl device "
           "TINYGRAD:B: tinygrad's own renderer, compiler and runtime (refimpl/tinygrad/backend.py); inputs the spec "
           "leaves undefined are never sent to them.", "",
           "## Headline", "", "| backend | pass | fail | unsupported | relaxed | suite wall time | tests |",
           "|---|---|---|---|---|---|---|"]
  for b, r in results.items():
    s = r.get("suite")
    if s is None:
      lines.append(f"| TINYGRAD:{b} | - | - | - | - | - | not run: {r.get('why', '')} |")
      continue
    c = s["cases"]
    lines.append(f"| TINYGRAD:{b} | {c['pass']} | {c['fail']} | {c['unsupported']} | {c['relaxed']} | "
                 f"{s['wall_s']:.0f} s | {s['tests']} |")
  lines += ["", "Cases are the op suite's (op x dtype, CAST and BITCAST pairs) as counted in each backend's suite report; "
            "the tests column is pytest's count over the op, program and rule tests "
            f"({', '.join(SUITE)}; PYTHON: the program and rule tests only). Wall time on this machine, one process.", "",
            "## Disagreement classes", "",
            "Each class has a shrunk reproducer (refimpl/tinygrad/conformance_report.py, CLASSES) run on each tinygrad "
            "backend now; `fails` means it breaks the rule there. All pass on refimpl's own backends.", "",
            "| class | what | rule | fails on | passes on refimpl's |", "|---|---|---|---|---|"]
  for c in CLASSES:
    fails = [b for b in results if results[b].get("classes", {}).get(c.id, (None,))[0]]
    lines.append(f"| {c.id} | {c.what} | {c.rule} | {', '.join(fails) or 'none'} | {results_refimpl(c, results)} |")
  lines += ["", "Reproducer outputs:", ""]
  for c in CLASSES:
    for b, r in results.items():
      if c.id in r.get("classes", {}): lines.append(f"- {c.id} on TINYGRAD:{b}: {r['classes'][c.id][1]}")
  lines += ["", "Other classes seen in the suite reports (their reproducers are in each backend's suite report, linked "
            "below): narrow floats (`__fp16` / `__bf16` arithmetic computed in float and rounded once, not per op), "
            "tinygrad's own EXP2 / LOG2 / SIN decompositions beyond the spec's ulp bounds, FDIV (no FDIV in tinygrad's "
            "C renderers' code_for_op: render error), vector types of unsigned C types (`unsigned long4`, a compile "
            "error).", "", "## Fuzz campaigns", "",
            f"One campaign of {fuzz_seconds:.0f} s per backend (`python -m refimpl.fuzz --backend TINYGRAD:B --time "
            f"{fuzz_seconds:.0f} --jobs 1`), findings deduplicated by signature (op, dtypes, kind)."
            + ("" if fuzz_seconds >= 600 else " Shorter than the 10-minute campaign; the full one: `python -m "
               "refimpl.tinygrad report --out docs/conformance --fuzz-seconds 600`."), ""]
  for b, r in results.items():
    f = r.get("fuzz")
    if f is None: continue
    lines += [f"### TINYGRAD:{b}", "", *[f"    {s}" for s in f["summary"]], ""]
    lines += [f"- {x.get('op')} {x.get('dtypes')} {x.get('kind')}: {x['detail'][:240]}" for x in f["findings"]] or ["- none"]
    lines.append("")
  lines += ["## Suite reports", ""] + [f"- TINYGRAD:{b}: [{r['suite']['report']}]({r['suite']['report']})"
                                        for b, r in results.items() if r.get("suite")]
  md = out / "tinygrad-0.10.1.md"
  md.write_text("\n".join(lines) + "\n")
  (out / "tinygrad-0.10.1.html").write_text(
    "<!doctype html><meta charset=utf-8><title>tinygrad 0.10.1 conformance</title>"
    f"<pre style='white-space: pre-wrap'>{html.escape(md.read_text())}</pre>\n")
  return md


def results_refimpl(c: DisagreementClass, results: dict) -> str: return results.get("_refimpl", {}).get(c.id, "-")


def main(out: Path, backends: list[str], fuzz_seconds: float, command: str) -> int:
  from refimpl.device import Device
  out.mkdir(parents=True, exist_ok=True)
  results: dict = {}
  for b in backends:
    why = Device.open_error(f"TINYGRAD:{b}")
    if why is not None:
      results[b] = {"why": why}
      continue
    print(f"refimpl.tinygrad report: TINYGRAD:{b}: suite", file=sys.stderr, flush=True)
    results[b] = {"suite": run_suite(b, out)}
    if fuzz_seconds > 0:
      print(f"refimpl.tinygrad report: TINYGRAD:{b}: fuzz {fuzz_seconds:.0f} s", file=sys.stderr, flush=True)
      results[b]["fuzz"] = run_fuzz(b, fuzz_seconds, out)
    results[b]["classes"] = {c.id: check_class(c, b) for c in CLASSES}
  refimpl_ok = {c.id: passes_on_refimpl(c) for c in CLASSES}
  md = write(out, results, fuzz_seconds, command)
  md.write_text(_fill_refimpl(md.read_text(), refimpl_ok))
  (out / "tinygrad-0.10.1.html").write_text(
    "<!doctype html><meta charset=utf-8><title>tinygrad 0.10.1 conformance</title>"
    f"<pre style='white-space: pre-wrap'>{html.escape(md.read_text())}</pre>\n")
  print(f"refimpl.tinygrad report: wrote {md}", file=sys.stderr)
  return 0


def _fill_refimpl(text: str, ok: dict[str, str]) -> str:
  out = []
  for line in text.splitlines():
    for cid, where in ok.items():
      if line.startswith(f"| {cid} |") and line.endswith("| - |"): line = line[: -len("| - |")] + f"| {where} |"
    out.append(line)
  return "\n".join(out) + "\n"
