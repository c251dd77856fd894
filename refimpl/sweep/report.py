"""The published tables of sweep directories: NAME.md, NAME.html and NAME.json (docs/conformance/float32-sweeps.*).

Per case and backend: the chunks done of all 2^32 / 2^chunk_bits (a sweep with fewer is shown as incomplete), the inputs
checked (the defined lanes of the chunks done), the rule, the max error (refimpl.sweep.chunk: ulps for float results,
|got - expected| for integer and bool results), the violations with the first violating inputs, the chunks that could
not be checked (unsupported, unavailable, error, crash, hang) and the backend's time. Per case: the reference's time and the
wall time from its first chunk's start to its last chunk's end (one run's figure when the case ran in one run).

Sources. The tables may combine several sources of one chunk size, given in order: sweep directories and the NAME.json
of an earlier report (runs on other machines, or a run whose directory is gone). Each (case, backend) row comes whole
from one source, the one with the most checked chunks of it (the later source on a tie), so no chunk is counted twice;
a case's chunk files, reference and wall times come from the source with the most chunk files of it (likewise).

The page says whose backends these are (refimpl's own, not tinygrad's: the tinygrad report judges those), opens with a
one-line summary, says why the wall time is less than the backends' times, and names where it comes from (the command,
commit and date of this report, and its sources: refimpl.testing.provenance); it links back to index.html when the
output folder has one (docs/conformance).
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from refimpl.dtype import dtypes
from refimpl.sweep.plan import CASES, SPACE
from refimpl.sweep.store import MANIFEST, CorruptChunk, StoreError, chunk_files, read_chunk, read_manifest, write_json
from refimpl.testing.provenance import provenance
from refimpl.testing.report_html import code_text, esc, page, provenance_html

FIRST = 5  # violating inputs shown per case and backend
CHECKED = ("pass", "fail")

@dataclass
class Row:
  """One backend's aggregate over a case's chunks."""
  chunks: int = 0            # chunks with a pass or fail record
  checked: int = 0
  max_error: int = 0
  violations: int = 0
  rule: str = ""
  seconds: float = 0.0
  declared_inexact: bool = False
  other: dict = field(default_factory=dict)   # status -> chunks (unsupported, unavailable, error, crash, hang)
  detail: str = ""                            # the first such chunk's reason
  first: list = field(default_factory=list)   # the first violating inputs, in input order

@dataclass
class CaseSummary:
  chunks: int = 0            # chunk files
  reference_s: float = 0.0
  begin: float = float("inf")
  end: float = 0.0
  backends: dict = field(default_factory=dict)

  @property
  def wall_s(self) -> float: return max(0.0, self.end - self.begin)

def summarize(out: Path) -> tuple[dict, list[str]]:
  """{chunk_bits, total, cases: {case: CaseSummary}} of a sweep directory, and the corrupt files found (each a line)."""
  bits = read_manifest(out)["chunk_bits"]
  cases: dict[str, CaseSummary] = {}
  problems = []
  for case, paths in chunk_files(out).items():
    s = cases.setdefault(case, CaseSummary())
    for path in paths:
      try: data = read_chunk(path)
      except CorruptChunk as e:
        problems.append(str(e))
        continue
      s.chunks += 1
      s.reference_s += data.get("reference_s", 0.0)
      if "finished" in data:
        s.begin, s.end = min(s.begin, data["finished"] - data.get("wall_s", 0.0)), max(s.end, data["finished"])
      for backend, rec in data["backends"].items(): _add(s.backends.setdefault(backend, Row()), rec, data["start"])
  return {"chunk_bits": bits, "total": SPACE >> bits, "cases": cases}, problems

def _add(row: Row, rec: dict, start: int) -> None:
  row.seconds += rec.get("seconds", 0.0)
  status = rec.get("status", "?")
  if status not in CHECKED:
    row.other[status] = row.other.get(status, 0) + 1
    row.detail = row.detail or rec.get("detail", "")
    return
  row.chunks += 1
  row.checked += rec["checked"]
  row.max_error = max(row.max_error, rec["max_error"])
  row.violations += rec["violations"]
  row.rule = row.rule or rec["rule"]
  row.declared_inexact |= bool(rec.get("declared_inexact"))
  row.first = sorted(row.first + [(start, v) for v in rec.get("first", [])], key=lambda x: int(x[1]["input"]["bits"], 16))[:FIRST]

def error_unit(case: str) -> str:
  """The unit of a case's max error: ulp (of the result dtype) for float results, none (|got - expected|) otherwise."""
  c = CASES.get(case)
  return "ulp" if c is not None and dtypes.is_float(c.result_dtype) else ""

def _not_run(cases: dict) -> list[str]:
  """The sweep cases (refimpl.sweep.plan) with no chunk in the directory: listed, so a partial run shows what it lacks."""
  return [c for c in CASES if c not in cases]

def _order(cases: dict) -> list[str]: return [c for c in CASES if c in cases] + sorted(set(cases) - set(CASES))

def _error(row: Row, case: str) -> str:
  if not row.chunks: return ""
  unit = error_unit(case)
  return f"{row.max_error} {unit}".strip()

def _time(s: CaseSummary) -> tuple[str, str]: return f"{s.reference_s:.0f} s", f"{s.wall_s:.0f} s"

def _done(row: Row, total: int) -> str: return "complete" if row.chunks == total else f"incomplete: {row.chunks}/{total} chunks"

def _violations(row: Row) -> str:
  if not row.violations: return "0"
  return f"{row.violations}" + (" (declared inexact)" if row.declared_inexact else "")

def _other(row: Row) -> str: return ", ".join(f"{n} {s}" for s, n in sorted(row.other.items()))

def _first_lines(row: Row) -> list[str]:
  return [f"input {v['input']['bits']} ({v['input']['value']}): expected {v['expected']['bits']} ({v['expected']['value']}), "
          f"got {v['got']['bits']} ({v['got']['value']})" for _, v in row.first]

INTRO = """Every float32 input (all 2^32 bit patterns) of each unary float op and each conversion from float32, on each
backend, against the spec (refimpl's emulator), in chunks of 2^{bits} inputs: `python -m refimpl.sweep` (docs/fuzzing.md,
"Float32 sweeps"). Inputs checked are the lanes the spec defines (an out-of-range float->int cast is undefined: never run
or compared). Max error: for float results the largest distance in ulps of the result dtype between the backend's result
and the spec's reference where neither is NaN (0: every lane bit for bit); for integer and bool results the largest
|got - expected|. The rule is the spec's: exact (bit for bit), tolerance N ulp (within N ulps; NaN, inf and zero exactly).
The backends are refimpl's own CLANG, LLVM, GPU and WEBGPU (refimpl/backends: refimpl's renderers on those compilers), not
tinygrad's: tinygrad's backends are judged on the tinygrad report (tinygrad-0.10.1.html), where for instance
TINYGRAD:CLANG's SIN-f32 fails through tinygrad's own SIN decomposition."""
WALL = ("Reference: the spec's results, computed once per chunk for every backend. Wall: from the case's first chunk's "
        "start to its last chunk's end; the chunks ran in parallel worker processes, so the wall time is less than the sum "
        "of the backends' times (and than one slow backend's).")


def summary_line(summary: dict) -> str:
  """One sentence: how many (case, backend) rows, how many complete, with violations, with chunks not checked."""
  rows = [(c, b, r) for c, s in summary["cases"].items() for b, r in s.backends.items()]
  complete = sum(r.chunks == summary["total"] for _, _, r in rows)
  violating = [f"{b} {c}" for c, b, r in rows if r.violations and not r.declared_inexact]
  relaxed = sum(bool(r.violations and r.declared_inexact) for _, _, r in rows)
  other = sum(bool(r.other) for _, _, r in rows)
  cases = {c for c, _, _ in rows}
  verdict = f"violations in {len(violating)}: {', '.join(violating)}" if violating else "no violation"
  return (f"{len(rows)} (case, backend) rows over {len(cases)} cases: {complete} complete, {verdict}"
          + (f", {relaxed} within a declared inexactness" if relaxed else "")
          + (f", {other} with chunks not checked" if other else "")
          + (f"; {len(_not_run(summary['cases']))} cases not run" if _not_run(summary["cases"]) else "") + ".")

def markdown(summary: dict, problems: list[str]) -> str:
  total, cases = summary["total"], summary["cases"]
  lines = ["# Float32 sweeps of refimpl's own backends", "", f"**{summary_line(summary)}**", "",
           INTRO.format(bits=summary["chunk_bits"]), "",
           "| case | backend | chunks | inputs checked | rule | max error | violations | not checked | backend time |",
           "|---|---|---|---|---|---|---|---|---|"]
  for case in _order(cases):
    for b, row in cases[case].backends.items():
      lines.append(f"| {case} | {b} | {_done(row, total)} | {row.checked:,} | {row.rule} | {_error(row, case)} "
                   f"| {_violations(row)} | {_other(row)} | {row.seconds:.0f} s |")
  lines += [f"| {case} | (every backend) | not run: 0/{total} chunks | 0 | | | | | |" for case in _not_run(cases)]
  lines += ["", "## Time per case", "", WALL, "",
            "| case | chunk files | reference | wall |", "|---|---|---|---|"]
  lines += [f"| {c} | {cases[c].chunks}/{total} | {' | '.join(_time(cases[c]))} |" for c in _order(cases)]
  bad = [(c, b, r) for c in _order(cases) for b, r in cases[c].backends.items() if r.violations or r.other]
  if bad: lines += ["", "## Violations and chunks not checked", ""]
  for c, b, r in bad:
    lines += [f"### {b}: {c}", ""]
    if r.other: lines += [f"- not checked: {_other(r)} ({r.detail})"]
    lines += [f"- {x}" for x in _first_lines(r)] + [""]
  if problems: lines += ["", "## Unreadable chunk files (left out)", "", *[f"- {p}" for p in problems]]
  return "\n".join(lines).rstrip() + "\n"

def _thead(*names: str) -> str: return "<thead><tr>" + "".join(f"<th>{esc(n)}</th>" for n in names) + "</tr></thead>"

def _sources_html(sources: list[str]) -> str:
  """Where the rows come from: sweep directories (chunk files) or an earlier report's JSON (its rows as published)."""
  if not sources: return ""
  what = [f"<code>{esc(s)}</code>" + (" (an earlier report's data: its rows as published, from the runs that made them)"
                                      if s.endswith(".json") else " (a sweep directory's chunk files)") for s in sources]
  return f"<p class=muted>The rows come from: {'; '.join(what)}.</p>"


def html(summary: dict, problems: list[str], prov: dict | None = None, up: str | None = None) -> str:
  total, cases = summary["total"], summary["cases"]
  head = _thead("case", "backend", "chunks", "inputs checked", "rule", "max error", "violations", "not checked", "backend time")
  rows = []
  for case in _order(cases):
    for b, row in cases[case].backends.items():
      cls = "fail" if row.violations else "pass" if row.chunks else "unsupported"
      if row.violations and row.declared_inexact: cls = "relaxed"
      done = "pass" if row.chunks == total else "relaxed"
      link = f"<a href='#{esc(b)}-{esc(case)}'>{_violations(row)}</a>" if row.violations or row.other else _violations(row)
      rows.append(f"<tr><th>{esc(case)}</th><td>{esc(b)}</td><td class={done}>{esc(_done(row, total))}</td>"
                  f"<td>{row.checked:,}</td><td>{esc(row.rule)}</td><td>{_error(row, case)}</td>"
                  f"<td class={cls}>{link}</td><td>{esc(_other(row))}</td><td>{row.seconds:.0f} s</td></tr>")
  rows += [f"<tr><th>{esc(case)}</th><td>(every backend)</td><td class=unsupported>not run: 0/{total} chunks</td><td>0</td>"
           "<td></td><td></td><td></td><td></td><td></td></tr>" for case in _not_run(cases)]
  intro = code_text(INTRO.format(bits=summary["chunk_bits"])).replace("tinygrad-0.10.1.html",
                                                                   "<a href='tinygrad-0.10.1.html'>tinygrad-0.10.1.html</a>")
  body = [provenance_html(prov or {}, up), "<h1>Float32 sweeps of refimpl's own backends</h1>",
          f"<p><b>{esc(summary_line(summary))}</b></p><p>{intro}</p>", _sources_html((prov or {}).get("sources", [])),
          f"<table>{head}<tbody>{''.join(rows)}</tbody></table>",
          f"<h2>Time per case</h2><p>{esc(WALL)}</p><table>{_thead('case', 'chunk files', 'reference', 'wall')}<tbody>",
          *[f"<tr><th>{esc(c)}</th><td>{cases[c].chunks}/{total}</td>{''.join(f'<td>{t}</td>' for t in _time(cases[c]))}</tr>"
            for c in _order(cases)], "</tbody></table>"]
  bad = [(c, b, r) for c in _order(cases) for b, r in cases[c].backends.items() if r.violations or r.other]
  if bad: body.append("<h2>Violations and chunks not checked</h2>")
  for c, b, r in bad:
    body.append(f"<h3 id='{esc(b)}-{esc(c)}'>{esc(b)}: {esc(c)}</h3>")
    if r.other: body.append(f"<p>not checked: {esc(_other(r))} ({esc(r.detail)})</p>")
    if r.first: body.append("<pre>" + esc("\n".join(_first_lines(r))) + "</pre>")
  if problems: body.append("<h2>Unreadable chunk files (left out)</h2><pre>" + esc("\n".join(problems)) + "</pre>")
  return page("Float32 sweeps of refimpl's own backends", "\n".join(body))

def as_json(summary: dict, prov: dict | None = None) -> dict:
  return {"chunk_bits": summary["chunk_bits"], "total": summary["total"], **({"provenance": prov} if prov else {}),
          "cases": {c: {**{k: v for k, v in asdict(s).items() if k not in ("backends", "begin", "end")}, "wall_s": s.wall_s,
                        "backends": {b: {**asdict(r), "first": [v for _, v in r.first]} for b, r in s.backends.items()}}
                    for c, s in summary["cases"].items()}}

def read_published(path: Path) -> dict:
  """The summary an earlier report's NAME.json holds (as_json's form), rows as they were published."""
  try: data = json.loads(path.read_text())
  except (OSError, UnicodeDecodeError, ValueError) as e: raise StoreError(f"{path}: not a readable report: {e}") from None
  try:
    cases = {}
    for case, c in data["cases"].items():
      s = CaseSummary(c["chunks"], c["reference_s"], 0.0, c["wall_s"])
      for b, r in c["backends"].items(): s.backends[b] = Row(**{**r, "first": [(0, v) for v in r["first"]]})
      cases[case] = s
    return {"chunk_bits": data["chunk_bits"], "total": data["total"], "cases": cases}
  except (KeyError, TypeError, AttributeError) as e:
    raise StoreError(f"{path}: not a sweep report's JSON (as `report` writes it): {type(e).__name__}: {e}") from None

def read_source(path: Path) -> tuple[dict, list[str]]:
  """A source's summary and its corrupt files: a sweep directory (summarize) or an earlier report's NAME.json."""
  if path.is_dir() or path.name == MANIFEST: return summarize(path if path.is_dir() else path.parent)
  return read_published(path), []

def combine(summaries: list[dict]) -> dict:
  """One summary of several sources of one chunk size (the module docstring's rule for which source gives what)."""
  bits = {s["chunk_bits"] for s in summaries}
  if len(bits) != 1: raise StoreError(f"the sources have chunks of different sizes (2^{', 2^'.join(map(str, sorted(bits)))})")
  cases: dict[str, CaseSummary] = {}
  for summary in summaries:
    for case, s in summary["cases"].items():
      mine = cases.setdefault(case, CaseSummary())
      if s.chunks >= mine.chunks: mine.chunks, mine.reference_s, mine.begin, mine.end = s.chunks, s.reference_s, s.begin, s.end
      for b, row in s.backends.items():
        if b not in mine.backends or row.chunks >= mine.backends[b].chunks: mine.backends[b] = row
  return {"chunk_bits": bits.pop(), "total": summaries[0]["total"], "cases": cases}

def publish(sources: Path | list[Path], out: Path, name: str) -> list[Path]:
  """Writes NAME.md, NAME.html and NAME.json of the sources (sweep directories or earlier reports' NAME.json, in order)
  into `out`; returns their paths."""
  read = [read_source(p) for p in ([sources] if isinstance(sources, Path) else sources)]
  summary, problems = combine([s for s, _ in read]), [p for _, ps in read for p in ps]
  out.mkdir(parents=True, exist_ok=True)
  paths = [out / f"{name}.md", out / f"{name}.html", out / f"{name}.json"]
  names = [p.as_posix() for p in ([sources] if isinstance(sources, Path) else sources)]
  prov = {**provenance(f"python -m refimpl.sweep report {' '.join(names)} --out {out.as_posix()} --name {name}"),
          "sources": names}
  paths[0].write_text(markdown(summary, problems))
  paths[1].write_text(html(summary, problems, prov, "index.html" if (out / "index.html").exists() else None))
  write_json(paths[2], as_json(summary, prov))
  return paths
