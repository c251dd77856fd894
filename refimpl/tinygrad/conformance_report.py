"""The conformance report of tinygrad 0.10.1's own backends: `python -m refimpl.tinygrad report --out docs/conformance`.

For each backend B (CLANG, LLVM, GPU, WEBGPU, PYTHON, or any tinygrad device refimpl.tinygrad.backend opens: the device
TINYGRAD:B) it
  1. runs the packaged conformance suite (spec_tests/test_conformance_{ops,programs,rules}.py; PYTHON: programs and rules
     only, tinygrad's per-thread Python emulator is too slow for the 65536-lane op sweeps) with --conformance-report,
     timing it; the suite report's JSON gives each op case's status;
  2. runs a fuzz campaign (`python -m refimpl.fuzz --backend TINYGRAD:B --time S`) and lists its findings, deduplicated by
     signature (op, dtypes, kind); a finding whose reduction stopped before its program lost its unused arguments is
     listed but its file is not kept (committed reproducers are reduced ones);
  3. runs every disagreement class's shrunk reproducer (CLASSES) on TINYGRAD:B and on refimpl's own CLANG, LLVM and GPU,
     and records whether it breaks the class's rule there (`replay(class_id, device)` reruns one).
Then, once for tinygrad as a whole, the three classes of what its kernels rely on (refimpl.tinygrad.reliance): kernels
that need a BARRIER to order globals, kernels whose C casts out of range or divides by zero on lanes a WHERE
discards, and kernels that need their workgroup to run in lock step (a missing BARRIER).
It writes tinygrad-0.10.1.md and tinygrad-0.10.1.html in the output folder, the data they are built from
(tinygrad-0.10.1.json: `report --classes-only` reruns the classes' reproducers over it) and each backend's suite report
beside them (tinygrad-0.10.1-B-suite.{md,html,json}). The HTML page is built from that data: the headline table, each
class with its rule, reproducer and per-backend result, an op x dtype grid per backend linked to the suite report's
reproducers, and the fuzz findings linked to their files. Every subprocess runs as an argument list.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from refimpl.dtype import DType, dtypes
from refimpl.ir import Ops, Program, ProgramBuilder
from refimpl.testing import report_html as rh

BACKENDS = ("CLANG", "LLVM", "GPU", "WEBGPU", "PYTHON")
SUITE = ["spec_tests/test_conformance_ops.py", "spec_tests/test_conformance_programs.py",
         "spec_tests/test_conformance_rules.py"]
SUITE_FOR = {"PYTHON": SUITE[1:]}
REFIMPL_BACKENDS = ("CLANG", "LLVM", "GPU")
F32 = dtypes.float32
TITLE = "tinygrad 0.10.1's backends against the spec"


def _elementwise(name: str, op: Ops, inputs: list[np.ndarray], out: DType | None = None) -> tuple[Program, list[np.ndarray]]:
  """out[i] = op(in...[i]) over 4 lanes; inputs[0] is the output buffer."""
  from refimpl.dtype import from_np
  b = ProgramBuilder(name)
  bufs = [b.global_buf(from_np(x.dtype), 4) for x in inputs]
  i = b.gidx(0, 4)
  vals = [b.load(x, i) for x in bufs[1:]]
  b.store(bufs[0], i, b.uop(op, out, tuple(vals)) if op is Ops.CAST else b.alu(op, *vals))
  return b.build(), inputs


def _mul_add():
  """a*b + c as MUL then ADD (each rounds once): a = b = 1+2^-12, c = -(1+2^-11) gives 0; an FMA gives 2^-24."""
  one = np.float32(1 + 2**-12)
  b = ProgramBuilder("mul_add")
  out, x, y, z = (b.global_buf(F32, 4) for _ in range(4))
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(x, i), b.load(y, i)), b.load(z, i)))
  return b.build(), [np.zeros(4, np.float32), np.full(4, one), np.full(4, one), np.full(4, -(1 + 2**-11), np.float32)]


def _add_nested():
  """a + (b + c) with a = 1, b = c = 2^-24: 1+2^-23; (a + b) + c rounds twice to 1."""
  b = ProgramBuilder("add_nested")
  out, x, y, z = (b.global_buf(F32, 4) for _ in range(4))
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.ADD, b.load(x, i), b.alu(Ops.ADD, b.load(y, i), b.load(z, i))))
  return b.build(), [np.zeros(4, np.float32), np.ones(4, np.float32), np.full(4, 2**-24, np.float32),
                     np.full(4, 2**-24, np.float32)]


def _max_nan():
  return _elementwise("max_nan", Ops.MAX, [np.zeros(4, np.float32), np.array([1, np.nan, 2, -3], np.float32),
                                           np.array([np.nan, 1, np.nan, np.nan], np.float32)])


def _cmplt_nan():
  return _elementwise("cmplt_nan", Ops.CMPLT, [np.zeros(4, np.bool_), np.array([np.nan, 1, np.nan, 1], np.float32),
                                               np.array([1, np.nan, np.nan, 2], np.float32)])


def _shl_i32():
  return _elementwise("shl_i32", Ops.SHL, [np.zeros(4, np.int32), np.array([1, 3, -1, 5], np.int32),
                                           np.array([2, 4, 31, 0], np.int32)])


def _neg_u32():
  return _elementwise("neg_u32", Ops.NEG, [np.zeros(4, np.uint32), np.array([1, 3, 0, 2**31], np.uint32)])


def _add_i8():
  return _elementwise("add_i8", Ops.ADD, [np.zeros(4, np.int8), np.array([-1, 100, -128, 5], np.int8),
                                          np.array([-1, 100, -1, 6], np.int8)])


def _exp2_subnormal():
  return _elementwise("exp2_subnormal", Ops.EXP2, [np.zeros(4, np.float32), np.array([-134.31805, -130, -140, -149], np.float32)])


def _cast_through_u8():
  """CAST int32 -> uint8 -> int32: -19 wraps to 237 (and 416 to 160)."""
  b = ProgramBuilder("cast_through_u8")
  out, x = b.global_buf(dtypes.int32, 4), b.global_buf(dtypes.int32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.uop(Ops.CAST, dtypes.int32, (b.uop(Ops.CAST, dtypes.uint8, (b.load(x, i),)),)))
  return b.build(), [np.zeros(4, np.int32), np.array([-19, 416, 255, 7], np.int32)]


def _sub_negative_constant():
  """x - (-1.5): a SUB whose second operand is a negative constant."""
  b = ProgramBuilder("sub_negative_constant")
  out, x = b.global_buf(F32, 4), b.global_buf(F32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.SUB, b.load(x, i), b.const(-1.5, F32)))
  return b.build(), [np.zeros(4, np.float32), np.array([0, 1, -2, 0.25], np.float32)]


@dataclass(frozen=True)
class DisagreementClass:
  id: str
  backends: tuple[str, ...]  # where it was first seen (the report runs it on every backend)
  what: str
  rule: str
  reproducer: Callable[[], tuple[Program, list[np.ndarray]]]
  exact: bool = True  # False: compared within the op's ulp bound (transcendentals)


CLASSES = [
  DisagreementClass("contraction-mul-add-f32", ("CLANG", "GPU"),
                    "a MUL feeding an ADD is fused into one FMA: tinygrad's clang flags have no -ffp-contract=off and "
                    "the C renderer inlines a*b into the ADD (OpenCL contracts too)",
                    "SPEC.md, arith: ADD and MUL round once each (exact); MULACC is the only op that may fuse", _mul_add),
  DisagreementClass("reassociation-add-f32", ("CLANG", "GPU"),
                    "the C-style renderer strips the parens of a nested ADD: a+(b+c) is rendered a+b+c, which C evaluates "
                    "as (a+b)+c", "SPEC.md, arith: each ADD rounds once, in the program's order", _add_nested),
  DisagreementClass("max-nan-f32", ("CLANG", "LLVM", "GPU", "WEBGPU", "PYTHON"),
                    "MAX is rendered (a<b)?b:a (tinygrad's extra_matcher), which drops a NaN in b (LLVM: fcmp ult, "
                    "true on NaN, drops a NaN in a instead)",
                    "SPEC.md, maximum: NaN when either operand is NaN", _max_nan),
  DisagreementClass("cmplt-nan-f32", ("LLVM",), "CMPLT is rendered `fcmp ult` (unordered: true when an operand is NaN)",
                    "SPEC.md, compare: a comparison with NaN is false (CMPLT)", _cmplt_nan),
  DisagreementClass("shift-i32-does-not-compile", ("WEBGPU", "LLVM"),
                    "SHL / SHR of int32: WGSL is rendered `a<<b` with an i32 count, and WGSL takes only a u32 shift count, "
                    "so the shader does not compile; tinygrad's LLVM renderer has no SHL (KeyError: render error)",
                    "SPEC.md, shifts: SHL / SHR of int32 by a count in [0, 32) are defined", _shl_i32),
  DisagreementClass("neg-unsigned-does-not-compile", ("WEBGPU", "LLVM"),
                    "NEG of uint32: WGSL is rendered `-a`, and WGSL has no unary minus on u32 (the shader does not "
                    "compile); tinygrad's LLVM renderer fails to render NEG of an unsigned int",
                    "SPEC.md, arith: NEG of an unsigned int wraps (two's complement, 0 - a)", _neg_u32),
  DisagreementClass("wgsl-cast-to-u8-keeps-high-bits", ("WEBGPU",),
                    "CAST to uint8 is rendered as a cast to WGSL's u32 (WGSL has no 8-bit type) without masking: "
                    "int32 -19 -> uint8 -> int32 gives -19, 416 gives 416 (found by the fuzzer)",
                    "SPEC.md, cast: an int to int cast wraps modulo 2^bits of the target (-19 -> 237, 416 -> 160)",
                    _cast_through_u8),
  DisagreementClass("sub-negative-constant-does-not-compile", ("CLANG", "GPU", "WEBGPU", "LLVM"),
                    "x - c with a negative constant c is rendered `(x--1.5f)` by the C-style renderers (C, OpenCL C, WGSL): "
                    "`--` is the decrement token and the kernel does not compile; tinygrad's LLVM renderer has no SUB "
                    "(KeyError). tinygrad's own kernels turn x - c into x + (-c) before rendering, so only a program that "
                    "keeps its SUB shows it (found by the fuzzer on WEBGPU)",
                    "SPEC.md, arith: SUB is defined for every float32 operand", _sub_negative_constant),
  DisagreementClass("wgsl-narrow-int-sign-extension", ("WEBGPU",),
                    "int8 / int16 loads (packed in u32 words) are sign-extended with the constant expression "
                    "`4294967295u<<8u`, which WGSL rejects as overflowing: no kernel of int8 or int16 compiles (the "
                    "probe reports both unsupported)", "SPEC.md, dtypes: int8 and int16 are value dtypes", _add_i8),
  DisagreementClass("wgsl-exp2-subnormal-f32", ("WEBGPU",),
                    "EXP2 is WGSL's exp2 builtin, which on this Vulkan driver (Mesa lavapipe) returns 0 where the "
                    "result is subnormal (LOG2 of a subnormal likewise answers -127)",
                    "SPEC.md, transcendental: EXP2 within 3 ulp of 2^x, subnormal results included", _exp2_subnormal,
                    exact=False),
]
CLASS_BY_ID = {c.id: c for c in CLASSES}
OTHER_CLASSES = ("narrow floats (`__fp16` / `__bf16` arithmetic computed in float and rounded once, not per op), tinygrad's "
                 "own EXP2 / LOG2 / SIN decompositions beyond the spec's ulp bounds, FDIV (no FDIV in tinygrad's C and WGSL "
                 "renderers' code_for_op: render error), vector types of unsigned C types (`unsigned long4`, a compile "
                 "error); on WEBGPU, bool kernels rendered with `bool + bool` (WGSL rejects them: bool unsupported), a "
                 "float4 store that does not render (AttributeError in the WGSL renderer) and float32 FDIV (no FDIV)")


def run_reproducer(c: DisagreementClass, device: str) -> tuple[bool, str]:
  """(breaks the rule on `device`, what it gave): the reproducer's output against the emulator's (exact, or within the
  op's ulp bound for a transcendental class); an exception is a failure, with its message."""
  from refimpl.emulator.machine import emulate
  from refimpl.runner import Kernel
  from refimpl.testing.compare import same_value
  program, inputs = c.reproducer()
  want = emulate(program, inputs).buffers[0]
  try: got = Kernel(program, device)(*[a.copy() for a in inputs])[0]
  except Exception as e: return True, " ".join(f"{type(e).__name__}: {e}".split())[:300]
  ok = same_value(got, want) if c.exact else _within_ulp(got, want, 3)
  return not bool(ok.all()), f"got {got.tolist()}, the spec gives {want.tolist()}"


def _within_ulp(got: np.ndarray, want: np.ndarray, ulp: int) -> np.ndarray:
  """float32 lanes within `ulp` units in the last place (signed-magnitude bit distance), NaN matching NaN."""
  def ordered(x: np.ndarray) -> np.ndarray:
    b = x.astype(np.float32).view(np.int32).astype(np.int64)
    return np.where(b < 0, -(b & 0x7FFFFFFF), b)
  return (np.abs(ordered(got) - ordered(want)) <= ulp) | (np.isnan(got) & np.isnan(want))


def replay(class_id: str, device: str) -> None:
  """Prints what class `class_id`'s reproducer gives on `device` (e.g. replay("max-nan-f32", "TINYGRAD:CLANG"))."""
  c = CLASS_BY_ID[class_id]
  bad, detail = run_reproducer(c, device)
  print(f"{class_id} on {device}: {'breaks' if bad else 'keeps'} the rule ({c.rule}): {detail}")


def replay_command(class_id: str, device: str = "TINYGRAD:CLANG") -> str:
  """The shell command that reruns a class's reproducer on a device."""
  return f"python -c \"from refimpl.tinygrad.conformance_report import replay; replay('{class_id}', '{device}')\""


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


def safe_label(backend: str) -> str:
  """A file-name-safe form of a backend label (a porter's module:Class included)."""
  return re.sub(r"[^A-Za-z0-9_.-]", "_", backend)


def suite_report(backend: str) -> str: return f"tinygrad-0.10.1-{safe_label(backend)}-suite"


def _cases(out: Path, backend: str) -> dict[str, str]:
  """case id -> status, from the suite report's JSON."""
  path = out / f"{suite_report(backend)}.json"
  if not path.exists(): return {}
  return {case: status for _, case, status, _ in json.loads(path.read_text())["results"]}


# the headline's columns: tinygrad's devices are judged against the spec itself, never against a baseline
HEADLINE_STATUSES = tuple(s for s in rh.STATUSES if s != "baseline")


def _counts(cases: dict[str, str]) -> dict[str, int]:
  return {s: sum(1 for v in cases.values() if v == s) for s in HEADLINE_STATUSES}


def run_suite(backend: str, out: Path) -> dict:
  report = out / f"{suite_report(backend)}.md"
  args = [sys.executable, "-m", "pytest", *SUITE_FOR.get(backend, SUITE), "--backend", f"TINYGRAD:{backend}", "-q",
          "-p", "no:cacheprovider", "--conformance-report", str(report)]
  t = time.perf_counter()
  res = subprocess.run(args, capture_output=True, text=True, check=False)
  wall = time.perf_counter() - t
  tail = [ln for ln in res.stdout.splitlines() if re.search(r"\d+ (passed|failed)", ln)]
  cases = _cases(out, backend)
  return {"wall_s": wall, "tests": tail[-1].strip("= ") if tail else res.stdout[-300:], "cases": _counts(cases),
          "statuses": cases, "report": report.with_suffix(".html").name, "files": SUITE_FOR.get(backend, SUITE)}


def run_fuzz(backend: str, seconds: float, out: Path) -> dict:
  where = out / "fuzz" / safe_label(backend)
  args = [sys.executable, "-m", "refimpl.fuzz", "--backend", f"TINYGRAD:{backend}", "--time", str(seconds), "--jobs", "1",
          "--out", str(where), "--quiet"]
  t = time.perf_counter()
  res = subprocess.run(args, capture_output=True, text=True, check=False)
  findings = []
  for stale in where.glob("test_*.py") if where.exists() else []: stale.unlink()  # JSON replays (fuzz replay)
  for f in sorted(where.glob("*.json")) if where.exists() else []:
    doc = json.loads(f.read_text())
    detail = " ".join(str(doc.get("detail", "")).split())[:300]
    if not fully_reduced(f):  # listed, but not published as a reproducer (module docstring)
      f.unlink()
      findings.append({**doc.get("signature", {}), "file": None, "detail": f"[not reduced: the reducer stopped early] {detail}"})
      continue
    findings.append({**doc.get("signature", {}), "file": f"fuzz/{safe_label(backend)}/{f.name}", "detail": detail})
  summary = [ln for ln in res.stdout.splitlines() if ln.startswith(("programs:", "  backend", "  TINYGRAD", "findings:"))]
  return {"wall_s": time.perf_counter() - t, "findings": findings, "summary": summary}


def fully_reduced(path: Path) -> bool:
  """Whether a finding's program takes no kernel argument that nothing uses (the reducer's last pass ran): only such
  reproducers are published (what spec_tests/test_fuzz_corpus.py holds every committed reproducer to)."""
  from refimpl.fuzz.corpus import load_finding
  from refimpl.fuzz.graph import Graph
  from refimpl.fuzz.reduce import unused_declarations
  graph = Graph.from_program(load_finding(path).case.program)
  return not [n for n in unused_declarations(graph) if n.op is not Ops.DEFINE_LOCAL]


def unsupported_dtypes(backend: str) -> dict[str, str]:
  """dtype -> why TINYGRAD:backend refuses it (its probe), for every value dtype of the spec."""
  from refimpl import spec
  from refimpl.device import Device
  dev = Device[f"TINYGRAD:{backend}"]
  return {spec.short_name(d): dev.unsupported_reasons.get(d, "") for d in spec.VALUE_DTYPES if not dev.supports_dtype(d)}


def markdown(results: dict, fuzz_seconds: float, command: str) -> str:
  """The report as markdown (the same data as the HTML page, without the grids)."""
  refimpl_ok, refimpl_reliance = results.get("_refimpl", {}), results.get("_reliance", {})
  results = {b: r for b, r in results.items() if not b.startswith("_")}
  lines = [f"# {TITLE}", "", f"Generated by `{command}` (refimpl.tinygrad.conformance_report). Each backend is the refimpl "
           "device TINYGRAD:B: tinygrad's own renderer, compiler and runtime (refimpl/tinygrad/backend.py); inputs the "
           "spec leaves undefined are never sent to them. The page: tinygrad-0.10.1.html.", "",
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
  lines += ["", "## Disagreement classes", "", "| class | what | rule | fails on | passes on refimpl's |",
            "|---|---|---|---|---|"]
  for c in CLASSES:
    lines.append(f"| {c.id} | {c.what} | {c.rule} | {', '.join(failing(c, results)) or 'none'} | {refimpl_ok.get(c.id, '-')} |")
  lines += ["", "Reproducer outputs:", ""]
  for c in CLASSES:
    for b, r in results.items():
      if c.id in r.get("classes", {}): lines.append(f"- {c.id} on TINYGRAD:{b}: {r['classes'][c.id][1]}")
  lines += ["", f"Other classes seen in the suite reports: {OTHER_CLASSES}.", ""]
  lines += _reliance_markdown(refimpl_reliance)
  lines += ["## Fuzz campaigns", "",
            f"One campaign of {fuzz_seconds:.0f} s per backend, findings deduplicated by signature (op, dtypes, kind).", ""]
  for b, r in results.items():
    f = r.get("fuzz")
    if f is None: continue
    lines += [f"### TINYGRAD:{b}", "", *[f"    {s}" for s in f["summary"]], ""]
    lines += [f"- {x.get('op')} {x.get('dtypes')} {x.get('kind')}: {x['detail'][:240]} ({x['file'] or 'no file'})"
              for x in f["findings"]]
    lines += ["- none"] if not f["findings"] else []
    lines.append("")
  lines += ["## Suite reports", ""] + [f"- TINYGRAD:{b}: [{r['suite']['report']}]({r['suite']['report']})"
                                        for b, r in results.items() if r.get("suite")]
  return "\n".join(lines) + "\n"


def _reliance_markdown(found: dict) -> list[str]:
  """The classes of what tinygrad's kernels rely on (refimpl.tinygrad.reliance), as markdown."""
  from refimpl.tinygrad.reliance import RELIANCE_TEXT
  out = []
  for key, (title, text) in RELIANCE_TEXT.items():
    rows = found.get(key, [])
    out += [f"## {title}", "", text, "", "| kernel | uop | op | thread | why |", "|---|---|---|---|---|"]
    lines = [f"| {r['kernel']} | {r['uop']} | {r['op']} | {r['lane']} | {r['reason'][:200]} |" for r in rows]
    out += lines or ["| none | | | | |"]
    out.append("")
  return out

def _reliance_html(found: dict) -> str:
  from refimpl.tinygrad.reliance import RELIANCE_TEXT
  parts = []
  for key, (title, text) in RELIANCE_TEXT.items():
    rows = "".join(f"<tr><td>{rh.esc(r['kernel'])}</td><td>{r['uop']}</td><td>{rh.esc(r['op'])}</td>"
                   f"<td>{rh.esc(str(r['lane']))}</td><td class=muted>{rh.esc(r['reason'][:240])}</td></tr>"
                   for r in found.get(key, []))
    table = (f"<table><thead><tr><th>kernel</th><th>uop</th><th>op</th><th>thread</th><th>why</th></tr></thead>"
             f"<tbody>{rows}</tbody></table>") if rows else "<p>none found</p>"
    parts.append(f"<h2>{rh.esc(title)}</h2><p>{rh.esc(text)}</p>{table}")
  return "\n".join(parts)

def reliance_results() -> dict:
  """refimpl.tinygrad.reliance's classes over what this machine captures (the REFIMPL device, tinygrad's CLANG)."""
  from refimpl.tinygrad.reference import install_reference_device
  from refimpl.tinygrad.reliance import report_classes
  from refimpl.tinygrad.toolchain import prepare_tinygrad
  return report_classes(install_reference_device(), prepare_tinygrad()["CLANG"] is None)


def failing(c: DisagreementClass, backends: dict) -> list[str]:
  """The backends on which class c's reproducer broke its rule."""
  return [b for b, r in backends.items() if r.get("classes", {}).get(c.id, (None,))[0]]


def _headline_html(results: dict) -> str:
  rows = []
  for b, r in results.items():
    s = r.get("suite")
    if s is None:
      why = rh.esc(r.get("why", ""))
      span = len(HEADLINE_STATUSES) + 3
      rows.append(f"<tr><th>TINYGRAD:{rh.esc(b)}</th><td colspan={span} class=unsupported>not run: {why}</td></tr>")
      continue
    c = s["cases"]
    counts = {st: c.get(st, 0) for st in HEADLINE_STATUSES}  # a count a report older than a status lacks is 0
    cells = "".join(f"<td class={st if n else 'zero'}>{n}</td>" for st, n in counts.items())
    rows.append(f"<tr><th><a href='#b-{rh.esc(safe_label(b))}'>TINYGRAD:{rh.esc(b)}</a></th>{cells}<td>{s['wall_s']:.0f} s</td>"
                f"<td>{rh.esc(s['tests'])}</td><td><a href='{rh.esc(s['report'])}'>{rh.esc(s['report'])}</a></td></tr>")
  head = "".join(f"<th class={st}>{rh.LABELS[st]}</th>" for st in HEADLINE_STATUSES)
  return (f"<table><thead><tr><th>backend</th>{head}<th>suite wall time</th><th>tests (pytest)</th><th>suite report</th>"
          f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _class_html(c: DisagreementClass, results: dict) -> str:
  program, inputs = c.reproducer()
  rows = []
  for b, r in results.items():
    got = r.get("classes", {}).get(c.id)
    if got is None: continue
    status = "unsupported" if got[0] is None else ("fail" if got[0] else "pass")
    rows.append(f"<tr><th>TINYGRAD:{rh.esc(b)}</th><td class={status}>{'breaks the rule' if got[0] else 'keeps it'}</td>"
                f"<td><code>{rh.esc(got[1])}</code></td></tr>")
  ins = "\n".join(f"buffer {k}: {a.dtype} {a.tolist()}" for k, a in enumerate(inputs))
  return (f"<h3 id='c-{rh.esc(c.id)}'>{rh.esc(c.id)}</h3><p>{rh.esc(c.what)}.</p><p><b>Rule</b>: {rh.esc(c.rule)}. "
          f"<b>Passes on refimpl's own</b>: {rh.esc(results.get('_refimpl', {}).get(c.id, '-'))}.</p>"
          f"<table><thead><tr><th>backend</th><th>result</th><th>output</th></tr></thead><tbody>{''.join(rows)}</tbody>"
          f"</table><details><summary>reproducer: {rh.esc(program.name)} ({len(program.uops)} uops) and its inputs</summary>"
          f"<pre>{rh.esc(program.listing())}</pre><pre>{rh.esc(ins)}</pre><pre>{rh.esc(replay_command(c.id))}</pre></details>")


def _backend_html(b: str, r: dict) -> str:
  parts = [f"<h3 id='b-{rh.esc(safe_label(b))}'>TINYGRAD:{rh.esc(b)}</h3>"]
  s = r.get("suite")
  if s is None: return parts[0] + f"<p class=muted>not run: {rh.esc(r.get('why', ''))}</p>"
  from refimpl.testing.pytest_plugin import anchor
  parts.append(f"<p>Suite report: <a href='{rh.esc(s['report'])}'>{rh.esc(s['report'])}</a> (every FAIL cell links to its "
               "reproducer there).</p>")
  parts.append(rh.grids(s["statuses"], lambda case: f"{s['report']}#{anchor(f'TINYGRAD:{b}', case)}"))
  why = r.get("unsupported", {})
  if why:
    items = "".join(f"<tr><th>{rh.esc(d)}</th><td>{rh.esc(w)}</td></tr>" for d, w in why.items())
    parts.append(f"<details><summary>why {len(why)} dtypes are unsupported (the probe kernel)</summary><table>{items}</table>"
                 "</details>")
  return "\n".join(parts)


def _file_link(file: str | None) -> str:
  return f"<a href='{rh.esc(file)}'>{rh.esc(file.rsplit('/', 1)[-1])}</a>" if file else "not kept (not reduced)"


def _fuzz_html(b: str, f: dict) -> str:
  rows = "".join(f"<tr><td>{rh.esc(x.get('op'))}</td><td>{rh.esc(x.get('dtypes'))}</td><td>{rh.esc(x.get('kind'))}</td>"
                 f"<td>{_file_link(x['file'])}</td>"
                 f"<td class=muted>{rh.esc(x['detail'][:240])}</td></tr>" for x in f["findings"])
  table = (f"<table><thead><tr><th>op</th><th>dtypes</th><th>kind</th><th>reproducer (fuzz replay FILE)</th><th>detail</th>"
           f"</tr></thead><tbody>{rows}</tbody></table>") if rows else "<p>no findings</p>"
  return f"<h3>TINYGRAD:{rh.esc(b)}</h3><pre>{rh.esc(chr(10).join(f['summary']))}</pre>{table}"


def html_page(results: dict, fuzz_seconds: float, command: str) -> str:
  """The report as a page, built from `results` (module docstring)."""
  backends = {b: r for b, r in results.items() if not b.startswith("_")}
  parts = [f"<h1>{rh.esc(TITLE)}</h1>",
           f"<p class=muted>Generated by <code>{rh.esc(command)}</code>. Each backend is the refimpl device TINYGRAD:B: "
           "tinygrad's own renderer, compiler and runtime (refimpl/tinygrad/backend.py); inputs the spec leaves undefined "
           "are never sent to them. A dtype is unsupported when a probe kernel of it does not render, compile or run.</p>",
           "<h2>Headline</h2>", _headline_html(backends),
           "<p class=muted>Cases are the op suite's (op x dtype, CAST and BITCAST pairs); the tests column is pytest's count "
           f"over the op, program and rule tests ({rh.esc(', '.join(SUITE))}; PYTHON: the program and rule tests only). "
           "Wall time on this machine, one process.</p>",
           "<h2>Disagreement classes</h2><p>Each class has a shrunk reproducer (CLASSES in "
           "refimpl/tinygrad/conformance_report.py), run now on every backend; <code>replay(id, device)</code> reruns it.</p>",
           "<ul>" + "".join(f"<li><a href='#c-{rh.esc(c.id)}'>{rh.esc(c.id)}</a>: fails on "
                            f"{rh.esc(', '.join(failing(c, backends)) or 'none')}</li>" for c in CLASSES) + "</ul>",
           *[_class_html(c, results) for c in CLASSES],
           f"<p>Other classes seen in the suite reports: {rh.esc(OTHER_CLASSES)}.</p>",
           _reliance_html(results.get("_reliance", {})),
           "<h2>Op x dtype per backend</h2>", rh.legend(), *[_backend_html(b, r) for b, r in backends.items()],
           f"<h2>Fuzz campaigns</h2><p>One campaign of {fuzz_seconds:.0f} s per backend (<code>python -m refimpl.fuzz --backend "
           f"TINYGRAD:B --time {fuzz_seconds:.0f} --jobs 1</code>), findings deduplicated by signature (op, dtypes, kind); "
           "each file replays with <code>python -m refimpl.fuzz replay FILE</code>.</p>",
           *[_fuzz_html(b, r["fuzz"]) for b, r in backends.items() if r.get("fuzz")]]
  return rh.page("tinygrad 0.10.1 conformance", "\n".join(parts))


def write(out: Path, results: dict, fuzz_seconds: float, command: str) -> Path:
  """Writes tinygrad-0.10.1.md, tinygrad-0.10.1.html and the data they are built from (tinygrad-0.10.1.json); returns
  the markdown's path."""
  doc = {"command": command, "fuzz_seconds": fuzz_seconds, "results": results}
  (out / "tinygrad-0.10.1.json").write_text(json.dumps(doc, indent=1) + "\n")
  md = out / "tinygrad-0.10.1.md"
  md.write_text(markdown(results, fuzz_seconds, command))
  (out / "tinygrad-0.10.1.html").write_text(html_page(results, fuzz_seconds, command))
  return md


def rerun_classes(out: Path) -> int:
  """Reruns every class's reproducer on the backends of the saved report (tinygrad-0.10.1.json) and on refimpl's own,
  and rewrites the pages; the suites and fuzz campaigns are not rerun (`report --classes-only`)."""
  doc = json.loads((out / "tinygrad-0.10.1.json").read_text())
  results = doc["results"]
  for b, r in results.items():
    if not b.startswith("_") and r.get("suite"): r["classes"] = {c.id: check_class(c, b) for c in CLASSES}
  results["_refimpl"] = {c.id: passes_on_refimpl(c) for c in CLASSES}
  results["_reliance"] = reliance_results()
  md = write(out, results, doc["fuzz_seconds"], doc["command"])
  print(f"refimpl.tinygrad report: reran the classes, wrote {md} and {md.with_suffix('.html')}", file=sys.stderr)
  return 0


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
    results[b] = {"suite": run_suite(b, out), "unsupported": unsupported_dtypes(b)}
    if fuzz_seconds > 0:
      print(f"refimpl.tinygrad report: TINYGRAD:{b}: fuzz {fuzz_seconds:.0f} s", file=sys.stderr, flush=True)
      results[b]["fuzz"] = run_fuzz(b, fuzz_seconds, out)
    results[b]["classes"] = {c.id: check_class(c, b) for c in CLASSES}
  results["_refimpl"] = {c.id: passes_on_refimpl(c) for c in CLASSES}
  results["_reliance"] = reliance_results()
  md = write(out, results, fuzz_seconds, command)
  print(f"refimpl.tinygrad report: wrote {md} and {md.with_suffix('.html')}", file=sys.stderr)
  return 0
