"""The pages of the tinygrad report, built from its data (tinygrad-0.10.1.json, written by
refimpl.tinygrad.report.runner): tinygrad-0.10.1.html (and .md) and index.html, the way into docs/conformance.

index.html gives a tinygrad user a verdict per backend (its pass rate over the cases it supports; which op families and
dtypes are safe and which are not, and how they fail) and links every page of the folder: this report, each backend's
suite report, the float32 sweeps of refimpl's own backends, the selftest pages and the fuzz findings, each with the
date and commit it was made from. Every page names its commit, date, toolchains and command, and links back to the
index. A FAIL is never one red: wrong value, does not render, does not compile, crashes, other error
(refimpl.testing.report_html.failure_kind); n/a is a dtype the device declares unsupported.
"""
from __future__ import annotations

import json
from collections import Counter, defaultdict
from pathlib import Path

from refimpl.testing import report_html as rh
from refimpl.tinygrad.report.classes import CLASSES, OTHER_CLASSES, DisagreementClass, failing, replay_command, safe_label

TITLE = "tinygrad 0.10.1's backends against the spec"
PAGE = "tinygrad-0.10.1"
INDEX = "index.html"
# the headline's columns: tinygrad's devices are judged against the spec itself, never against a baseline
HEADLINE_STATUSES = tuple(s for s in rh.STATUSES if s not in ("baseline", "untested"))
# op families, for the verdicts (every ALU op of the suite in one family; CAST and BITCAST are their own)
FAMILIES = {"arithmetic": ("ADD", "SUB", "MUL", "NEG", "MULACC"), "division": ("IDIV", "MOD", "FDIV", "RECIP"),
            "comparison and select": ("CMPLT", "CMPNE", "MAX", "WHERE"), "bitwise and shifts": ("AND", "OR", "XOR", "SHL", "SHR"),
            "transcendental and sqrt": ("EXP2", "LOG2", "SIN", "SQRT"), "random (THREEFRY)": ("THREEFRY",),
            "CAST": ("CAST",), "BITCAST": ("BITCAST",)}
FAMILY_OF = {op: f for f, ops in FAMILIES.items() for op in ops}


def _backends(results: dict) -> dict:
  return {b: r for b, r in results.items() if not b.startswith("_")}


NATIVE_LEVEL = {"level": "ran", "standin": "tinygrad's own runtime", "hardware": ""}
LEVEL_MEANING = {"ran": "its kernels ran and their results were held to the spec",
                 "compiled": "a pass is a kernel that rendered and compiled; nothing ran, no value was checked",
                 "rendered": "a pass is a kernel that rendered; nothing compiled or ran"}


def level(r: dict) -> dict:
  """A backend's level (refimpl.tinygrad.v0_10.standins): the data's, or ran on tinygrad's own runtime (data made before it)."""
  return r.get("level") or NATIVE_LEVEL


def level_text(r: dict) -> str:
  """"compiled (tinygrad's NVCompiler ...; no NVIDIA GPU here)": the level and what judged it."""
  lv = level(r)
  return f"{lv['level']} ({lv['standin']}" + (f"; stands in for {lv['hardware']})" if lv.get("hardware") else ")")


def _provenance(doc: dict) -> dict:
  """The run's provenance; a report older than provenance names its command alone."""
  return doc.get("provenance") or {"command": doc.get("command", "?"), "date": "an unknown date", "commit": "unknown"}


def kind_counts(suite: dict) -> Counter:
  """FAIL cells by kind (report_html.KINDS)."""
  details = suite.get("details", {})
  return Counter(rh.failure_kind(details.get(c, "")) for c, s in suite["statuses"].items() if s == "fail")


# ***** the verdicts *****

def verdict(backend: str, r: dict) -> dict:
  """A tinygrad user's verdict on one backend: {rate, safe, unsafe: [sentence], unsupported} from its suite's cases."""
  s = r["suite"]
  statuses, details = s["statuses"], s.get("details", {})
  bad: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))  # family -> kind -> "OP dtype"
  seen_ok: dict[str, int] = Counter()
  for case, status in statuses.items():
    op, src, dst = rh.case_parts(case)
    family = FAMILY_OF.get(op, op)
    if status == "fail": bad[family][rh.failure_kind(details.get(case, ""))].add(f"{op} {src}" + (f"->{dst}" if dst else ""))
    elif status == "pass": seen_ok[family] += 1
  safe = [f for f in FAMILIES if seen_ok[f] and f not in bad]
  unsafe = []
  for family in FAMILIES:
    if family not in bad: continue
    parts = []
    for kind, cases in sorted(bad[family].items(), key=lambda kv: -len(kv[1])):
      parts.append(f"{rh.KIND_MEANING[kind].split(':')[0]}: {_cases_text(sorted(cases, key=_case_order))}")
    unsafe.append(f"{family}: {'; '.join(parts)}")
  classes = [c.id for c in CLASSES if r.get("classes", {}).get(c.id, (None,))[0]]
  return {"rate": rh.pass_rate(s["cases"]), "safe": safe, "unsafe": unsafe, "classes": classes,
          "unsupported": sorted(r.get("unsupported", {}), key=_dtype_order), "level": level(r)["level"]}


def _dtype_order(d: str) -> int: return rh.DTYPE_ORDER.index(d) if d in rh.DTYPE_ORDER else len(rh.DTYPE_ORDER)


def _case_order(text: str) -> tuple:
  op, _, dts = text.partition(" ")
  return (op, [_dtype_order(d) for d in dts.split("->")])


def _cases_text(cases: list[str]) -> str:
  """"SUB i8, SUB u8, ..." as "SUB on i8, u8, ..."; casts as "CAST f32->bf16, ..."."""
  by_op: dict[str, list[str]] = defaultdict(list)
  for c in cases:
    op, _, dts = c.partition(" ")
    by_op[op].append(dts)
  return ", ".join(f"{op} on {' '.join(d)}" if op not in ("CAST", "BITCAST") else f"{op} {' '.join(d)}"
                   for op, d in by_op.items())


# ***** the report page *****

def _headline_html(backends: dict) -> str:
  rows = []
  span = 6 + len(rh.KINDS) + len(HEADLINE_STATUSES)
  for b, r in backends.items():
    s = r.get("suite")
    if s is None:
      rows.append(f"<tr><th>TINYGRAD:{rh.esc(b)}</th><td colspan={span} class=unsupported>not run: "
                  f"{rh.esc(rh.scrub(r.get('why', '')))}</td></tr>")
      continue
    c, kinds = s["cases"], kind_counts(s)
    cell = lambda n, cls: f"<td class='{cls if n else 'zero'}'>{n}</td>"
    fails = "".join(cell(kinds.get(k, 0), f"fail k-{k}") for k in rh.KINDS)
    if s.get("report"):
      tests = (f"<td><a href='{rh.esc(s['report'])}#failing-tests'>{s.get('failed_tests', '?')} failing</a><br>"
               f"<small class=muted>pytest: {rh.esc(s['tests'])}</small></td>"
               f"<td><a href='{rh.esc(s['report'])}'>{rh.esc(s['report'])}</a></td>")
    else: tests = f"<td>{s.get('failed_tests', '?')} failing<br><small class=muted>{rh.esc(s['tests'])}</small></td><td>-</td>"
    rows.append(f"<tr><th><a href='#b-{rh.esc(safe_label(b))}'>TINYGRAD:{rh.esc(b)}</a></th>"
                f"<td><b>{rh.esc(level(r)['level'])}</b><br><small class=muted>{rh.esc(level(r)['standin'])}</small></td>"
                f"<td>{rh.esc(rh.pass_rate(c))}</td>"
                f"{cell(c.get('pass', 0), 'pass')}{fails}{cell(c.get('unsupported', 0), 'unsupported')}"
                f"{cell(c.get('relaxed', 0), 'relaxed')}<td>{s['wall_s']:.0f} s</td>{tests}</tr>")
  head = "".join(f"<th class='fail k-{k}'>FAIL: {rh.KIND_LABELS[k]}</th>" for k in rh.KINDS)
  return (f"<table><thead><tr><th>backend</th><th>judged at</th><th>pass rate (over supported cases)</th>"
          f"<th class=pass>pass</th>{head}<th class=unsupported>n/a</th><th class=relaxed>relaxed</th><th>suite wall time</th>"
          f"<th>failing tests (pytest)</th><th>suite report</th></tr></thead><tbody>{''.join(rows)}</tbody></table>")


def _class_html(c: DisagreementClass, results: dict) -> str:
  program, inputs = c.reproducer()
  rows = []
  for b, r in _backends(results).items():
    got = r.get("classes", {}).get(c.id)
    if got is None: continue
    status = "unsupported" if got[0] is None else ("fail" if got[0] else "pass")
    word = "not run" if got[0] is None else ("breaks the rule" if got[0] else "keeps it")
    rows.append(f"<tr><th>TINYGRAD:{rh.esc(b)}</th><td class={status}>{word}</td><td>{rh.message_html(got[1], 6)}</td></tr>")
  ins = "\n".join(f"buffer {k}: {a.dtype} {a.tolist()}" for k, a in enumerate(inputs))
  return (f"<h3 id='c-{rh.esc(c.id)}'>{rh.esc(c.id)}</h3><p>{rh.code_text(c.what)}.</p><p><b>Rule</b>: "
          f"{rh.code_text(c.rule)}. <b>Passes on refimpl's own</b>: {rh.esc(results.get('_refimpl', {}).get(c.id, '-'))}."
          f"</p><table><thead><tr><th>backend</th><th>result</th><th>output</th></tr></thead><tbody>{''.join(rows)}</tbody>"
          f"</table><p>Rerun: <code>{rh.esc(replay_command(c.id))}</code></p><details><summary>the reproducer: "
          f"{rh.esc(program.name)} ({len(program.uops)} uops) and its inputs</summary><pre>{rh.esc(program.listing())}</pre>"
          f"<pre>{rh.esc(ins)}</pre></details>")


RELIANCE_RERUN = ("python -c \"from refimpl.tinygrad.report.runner import reliance_results; "
                  "import json; print(json.dumps(reliance_results(), indent=1))\"")


def _reliance_html(found: dict) -> str:
  from refimpl.tinygrad.report.reliance import RELIANCE_TEXT
  parts = []
  for key, (title, text) in RELIANCE_TEXT.items():
    rows = []
    for r in found.get(key, []):
      workload, _, kernel = r["kernel"].rpartition(" ")
      file = r.get("file")
      repro = (f"<a href='{rh.esc(file)}'>{rh.esc(file.rpartition('/')[2])}</a><br><code>python -m refimpl.fuzz replay "
               f"docs/conformance/{rh.esc(file)}</code>") if file else ""
      rows.append(f"<tr><td>{rh.esc(workload or '-')}</td><td><code>{rh.esc(kernel)}</code></td><td>{r['uop']}</td>"
                  f"<td>{rh.esc(r['op'])}</td><td>{rh.esc(str(r['lane']))}</td><td>{rh.message_html(r['reason'], 6)}</td>"
                  f"<td>{repro}</td></tr>")
    head = ("<thead><tr><th>workload</th><th>tinygrad's kernel name</th><th>uop</th><th>op</th><th>thread</th><th>why</th>"
            "<th>reproducer</th></tr></thead>")
    table = f"<table>{head}<tbody>{''.join(rows)}</tbody></table>" if rows else "<p>none found</p>"
    parts.append(f"<h3 id='r-{key}'>{rh.esc(title)}</h3><p>{rh.code_text(text)}</p>{table}")
  return ("<h2 id=reliance>What tinygrad's kernels rely on</h2><p>Found by running tinygrad's captured kernels on the "
          "emulator (refimpl.tinygrad.report.reliance: the checkout's corpus, one training step, tinygrad's edge cases); rerun "
          f"all three with <code>{rh.esc(RELIANCE_RERUN)}</code>. Each kernel's reproducer is its case file: its replay "
          "gives the spec's verdict on it (defined, or where it is undefined), and with <code>--backend TINYGRAD:CLANG"
          "</code> it runs on tinygrad's own device.</p>" + "\n".join(parts))


def _backend_html(b: str, r: dict) -> str:
  head = f"<h3 id='b-{rh.esc(safe_label(b))}'>TINYGRAD:{rh.esc(b)}</h3>"
  s = r.get("suite")
  if s is None: return head + f"<p class=muted>not run: {rh.esc(rh.scrub(r.get('why', '')))}</p>"
  from refimpl.testing.pytest_plugin import anchor
  judged = (f"<p>Judged at <b>{rh.esc(level(r)['level'])}</b>: {rh.esc(level_text(r))}; "
            f"{rh.esc(LEVEL_MEANING[level(r)['level']])}.</p>")
  if s.get("report"):
    parts = [head, judged, f"<p>Suite report: <a href='{rh.esc(s['report'])}'>{rh.esc(s['report'])}</a> (every FAIL cell "
                           "links to its reproducer there; hover a cell for its message).</p>",
             rh.grids(s["statuses"], lambda case: f"{s['report']}#{anchor(f'TINYGRAD:{b}', case)}", s.get("details", {}))]
  else:
    parts = [head, judged, f"<p>Every op case built to that level (hover a cell for its message); rerun with "
                           f"<code>{rh.esc(s.get('command', ''))}</code>.</p>",
             rh.grids(s["statuses"], lambda case: None, s.get("details", {}))]
  why = r.get("unsupported", {})
  if why:
    items = "".join(f"<tr><th>{rh.esc(d)}</th><td>{rh.esc(rh.scrub(w))}</td></tr>" for d, w in why.items())
    parts.append(f"<details><summary>why {len(why)} dtypes are n/a (the device's declaration)</summary><table>{items}</table>"
                 "</details>")
  return "\n".join(parts)


def _file_link(file: str | None) -> str:
  return f"<a href='{rh.esc(file)}'>{rh.esc(file.rsplit('/', 1)[-1])}</a>" if file else "not published"


def _fuzz_html(b: str, f: dict) -> str:
  rows = "".join(f"<tr><td>{rh.esc(x.get('op'))}</td><td>{rh.esc(x.get('dtypes'))}</td><td>{rh.esc(x.get('kind'))}</td>"
                 f"<td>{_file_link(x['file'])}<br><code class=muted>python -m refimpl.fuzz replay "
                 f"docs/conformance/{rh.esc(x['file'])}</code></td><td>{rh.message_html(x['detail'], 4)}</td></tr>"
                 for x in f["findings"])
  table = ("<table><thead><tr><th>op</th><th>dtypes</th><th>kind</th><th>reproducer</th><th>detail</th></tr></thead>"
           f"<tbody>{rows}</tbody></table>") if rows else "<p>no published finding</p>"
  dropped = "".join(f"<li>{rh.esc(x.get('op'))} {rh.esc(x.get('dtypes'))} {rh.esc(x.get('kind'))}: {rh.esc(x['why'])}</li>"
                    for x in f.get("dropped", []))
  summary = [ln for ln in f.get("summary", []) if ".json" not in ln]  # the table lists the findings, with their files
  kept = " (the campaign of an earlier run, kept with --keep-fuzz; each finding replayed again now)" if f.get("kept") else ""
  return (f"<h3 id='f-{rh.esc(safe_label(b))}'>TINYGRAD:{rh.esc(b)}</h3><p>Campaign: <code>{rh.esc(f.get('command', ''))}</code>"
          f"{kept}.</p><pre>{rh.esc(chr(10).join(summary))}</pre>{table}"
          + (f"<details><summary>{len(f.get('dropped', []))} findings not published, and why</summary><ul>{dropped}</ul>"
             "</details>" if dropped else ""))


def html_page(doc: dict) -> str:
  """The report as a page (module docstring)."""
  results = doc["results"]
  backends = _backends(results)
  toc = [("headline", "Headline"), ("classes", "Disagreement classes"), ("reliance", "What tinygrad's kernels rely on"),
         ("grids", "Op x dtype per backend"), ("fuzz", "Fuzz campaigns")]
  parts = [rh.provenance_html(_provenance(doc), INDEX), f"<h1>{rh.esc(TITLE)}</h1>",
           "<p>Each backend is the refimpl device TINYGRAD:B: tinygrad's own renderer, compiler and runtime "
           "(refimpl/tinygrad/v0_10/backend.py), judged against the spec; inputs the spec leaves undefined are never sent to "
           "them. A device whose hardware is not here is judged at the highest level this machine allows "
           "(refimpl/tinygrad/v0_10/standins.py): <b>ran</b> on a stand-in runtime (named), <b>compiled</b> with the closest "
           "toolchain (named: a pass is a kernel that compiled, nothing ran), or <b>rendered</b> (a pass is a kernel "
           "that rendered); a disagreement class that needs a run is \"not run\" there. A dtype is n/a when tinygrad "
           "declares it unsupported on the device (tinygrad.device.is_dtype_supported); "
           "a declared dtype whose kernels do not render or compile is a FAIL of that kind.</p>",
           "<nav class=toc>" + " &middot; ".join(f"<a href='#{a}'>{t}</a>" for a, t in toc) + "</nav>",
           "<h2 id=headline>Headline</h2>", _headline_html(backends), *[f"<p class=muted>{rh.esc(m)}</p>" for m in merged(doc)],
           "<p class=muted>Cases are the op suite's (op x dtype, CAST and BITCAST pairs); the failing tests column is "
           f"pytest's count over the op, program and rule tests ({rh.esc(', '.join(_suite_files(backends)))}), each "
           "listed with its rerun command on the suite report. Wall time on the machine that made the page, one "
           "process.</p>",
           "<h2 id=classes>Disagreement classes</h2><p>Each class has a shrunk reproducer (refimpl.tinygrad.report.classes),"
           " run on every backend when the page was made; the line under each reruns it.</p>",
           "<ul>" + "".join(f"<li><a href='#c-{rh.esc(c.id)}'>{rh.esc(c.id)}</a>: fails on "
                            f"{rh.esc(', '.join(failing(c, backends)) or 'none')}</li>" for c in CLASSES) + "</ul>",
           *[_class_html(c, results) for c in CLASSES],
           f"<p>Other classes seen in the suite reports: {rh.code_text(OTHER_CLASSES)}.</p>",
           _reliance_html(results.get("_reliance", {})),
           "<h2 id=grids>Op x dtype per backend</h2>", rh.legend(("pass", "fail", "unsupported", "relaxed")),
           *[_backend_html(b, r) for b, r in backends.items()],
           "<h2 id=fuzz>Fuzz campaigns</h2><p>One campaign per backend, findings deduplicated by signature (op, dtypes, "
           "kind). A finding is published only when it is reduced and replays, in a fresh process, as the failure it "
           "claims; refimpl's own errors are never published as a backend's finding.</p>",
           *[_fuzz_html(b, r["fuzz"]) for b, r in backends.items() if r.get("fuzz")]]
  return rh.page(f"{TITLE} (refimpl conformance)", "\n".join(parts))


def merged(doc: dict) -> list[str]:
  """A sentence per run reported into the data with --merge: which backends, by what command, when, from what commit."""
  out = []
  for m in doc.get("merged", []):
    prov, seconds = m.get("provenance", {}), m.get("fuzz_seconds") or 0
    fuzz = f"{seconds:.0f} s each" if seconds else "none"
    out.append(f"{', '.join(f'TINYGRAD:{b}' for b in m['backends'])}: reported into this page on {prov.get('date')} from "
               f"refimpl commit {prov.get('commit')} by {prov.get('command')} (fuzz campaigns: {fuzz}).")
  return out


def _suite_files(backends: dict) -> list[str]:
  return sorted({f for r in backends.values() if r.get("suite") for f in r["suite"].get("files", [])})


def markdown(doc: dict) -> str:
  """The headline and the verdicts as markdown (the page has the rest)."""
  backends = _backends(doc["results"])
  prov = _provenance(doc)
  lines = [f"# {TITLE}", "", f"Made on {prov.get('date')} from refimpl commit {prov.get('commit')} by "
           f"`{prov.get('command')}`. The page: [{PAGE}.html]({PAGE}.html); all pages: [index.html](index.html).", "",
           "| backend | judged at | pass rate | pass | " + " | ".join(f"FAIL: {rh.KIND_LABELS[k]}" for k in rh.KINDS) +
           " | n/a | failing tests |", "|---" * (6 + len(rh.KINDS)) + "|"]
  for b, r in backends.items():
    s = r.get("suite")
    if s is None:
      lines.append(f"| TINYGRAD:{b} | not run: {rh.scrub(r.get('why', ''))} |")
      continue
    kinds = kind_counts(s)
    lines.append(f"| TINYGRAD:{b} | {level_text(r)} | {rh.pass_rate(s['cases'])} | {s['cases']['pass']} | "
                 + " | ".join(str(kinds.get(k, 0)) for k in rh.KINDS) + f" | {s['cases']['unsupported']} | "
                 f"{s.get('failed_tests', '?')} |")
  lines += ["", *merged(doc), "", "## Verdicts", ""]
  for b, r in backends.items():
    if r.get("suite"): lines += [f"- {line}" for line in verdict_lines(b, r)]
  return "\n".join(lines) + "\n"


def verdict_lines(b: str, r: dict) -> list[str]:
  v = verdict(b, r)
  judged = "" if v["level"] == "ran" and not r.get("level", {}).get("hardware") else f" (judged at {level_text(r)})"
  what = "pass" if v["level"] == "ran" else f"reach {v['level']}"
  out = [f"TINYGRAD:{b}{judged}: {v['rate']} of the cases it supports {what}. "
         f"{'Safe' if v['level'] == 'ran' else 'Every case reaches ' + v['level'] + ' in'}: "
         f"{', '.join(v['safe']) or 'no op family'}."]
  out += [f"Not safe, {u}." for u in v["unsafe"]]
  if v["classes"]: out.append(f"In whole programs it breaks: {', '.join(v['classes'])}.")
  if v["unsupported"]: out.append(f"n/a (declared unsupported): {', '.join(v['unsupported'])}.")
  return out


# ***** the index *****

def _page_meta(out: Path, name: str) -> tuple[str, str]:
  """(date, commit) of a page from its JSON's provenance, when it has one."""
  path = out / f"{name}.json"
  if not path.exists(): return "", ""
  doc = json.loads(path.read_text())
  prov = doc.get("provenance") or {}
  return prov.get("date", ""), prov.get("commit", "")


def pages_of(out: Path) -> list[tuple[str, str, str]]:
  """Every page of the folder the index links, as (file, title, what it is for), in reading order."""
  pages = [(f"{PAGE}.html", "tinygrad 0.10.1's backends against the spec",
            "for a tinygrad user choosing a backend, and a porter: headline, disagreement classes with reproducers, "
            "op x dtype grids, fuzz findings")]
  for suite in sorted(out.glob(f"{PAGE}-*-suite.html")):
    backend = suite.name.removeprefix(f"{PAGE}-").removesuffix("-suite.html")
    pages.append((suite.name, f"TINYGRAD:{backend}: the suite report",
                  "every op case with its message, hex bits and a replay line; every failing test with its rerun command"))
  if (out / "float32-sweeps.html").exists():
    pages.append(("float32-sweeps.html", "float32 sweeps of refimpl's own backends",
                  "every float32 input of the unary float ops and float32 casts on refimpl's own CLANG, LLVM, GPU and "
                  "WEBGPU (not tinygrad's)"))
  for selftest in sorted(out.glob("tinygrad*-selftest.html")):
    pages.append((selftest.name, f"{selftest.stem}: tinygrad's own tests on refimpl",
                  "tinygrad's test files run on the REFIMPL device and tinygrad's devices"))
  return pages


def index_page(out: Path, doc: dict) -> str:
  """index.html (module docstring)."""
  backends = _backends(doc["results"])
  verdicts = []
  for b, r in backends.items():
    if r.get("suite") is None:
      verdicts.append(f"<tr><th>TINYGRAD:{rh.esc(b)}</th><td colspan=2>not run here: "
                      f"{rh.esc(rh.scrub(r.get('why', '')))}</td></tr>")
      continue
    v = verdict(b, r)
    unsafe = "".join(f"<li>{rh.esc(u)}</li>" for u in v["unsafe"]) or "<li>nothing found</li>"
    na = f"<p class=muted>n/a (declared unsupported): {rh.esc(', '.join(v['unsupported']))}</p>" if v["unsupported"] else ""
    programs = ", ".join(f"<a href='{PAGE}.html#c-{rh.esc(c)}'>{rh.esc(c)}</a>" for c in v["classes"])
    na = (f"<p><b>In whole programs</b> (beyond single ops) it breaks: {programs}.</p>" if programs else "") + na
    judged = f"<p><b>Judged at {rh.esc(v['level'])}</b>: {rh.esc(level_text(r))}; {rh.esc(LEVEL_MEANING[v['level']])}.</p>"
    verdicts.append(f"<tr><th><a href='{PAGE}.html#b-{rh.esc(safe_label(b))}'>TINYGRAD:{rh.esc(b)}</a></th>"
                    f"<td>{rh.esc(v['rate'])}</td><td>{judged}<p><b>Safe</b>: "
                    f"{rh.esc(', '.join(v['safe']) or 'no op family')}"
                    f" (every supported case of these passes).</p><p><b>Not safe</b>:</p><ul>{unsafe}</ul>{na}</td></tr>")
  rows = []
  for file, title, what in pages_of(out):
    date, commit = _page_meta(out, file.removesuffix(".html"))
    made = f"{date}, commit {commit}" if date else "see the page"
    rows.append(f"<tr><td><a href='{rh.esc(file)}'>{rh.esc(title)}</a></td><td>{rh.esc(what)}</td><td>{rh.esc(made)}</td></tr>")
  findings = sorted(p.relative_to(out).as_posix() for p in (out / "fuzz").glob("*/*.json")) if (out / "fuzz").exists() else []
  links = "".join(f"<li><a href='{rh.esc(f)}'>{rh.esc(f)}</a></li>" for f in findings)
  return rh.page("refimpl conformance pages", "\n".join([
    rh.provenance_html(_provenance(doc)),
    *[f"<p class=muted>{rh.esc(m)}</p>" for m in merged(doc)],  # the rows reported later, each with its own provenance
    "<h1>refimpl conformance pages</h1>",
    "<p>refimpl is an executable specification of tinygrad 0.10.1's kernel language; these pages hold real backends "
    "to it. <b>Two kinds of backend</b> appear: tinygrad's own (TINYGRAD:CLANG, :LLVM, :GPU, :WEBGPU: tinygrad's renderer, "
    "compiler and runtime, judged here; :QCOM, :DSP, :NV, :CUDA, :AMD, :METAL, whose hardware is not here: judged at the "
    "level this machine allows, ran on a stand-in, compiled or rendered, as each row says) and refimpl's own backends "
    "(CLANG, LLVM, GPU, WEBGPU: refimpl's renderers on "
    "those compilers; the float32 sweeps and the main job's page), which this repository's tests hold to the spec. A porter "
    "reads "
    "<a href='../porting.md'>docs/porting.md</a>.</p>",
    "<h2 id=verdict>Verdict for a tinygrad user</h2>",
    "<p>Per tinygrad backend: the pass rate over the cases it supports, the op families whose every supported case "
    "passes (single ops: every op on every dtype it supports), where it breaks the spec and how (a wrong value, a "
    "kernel that does not render or compile, a crash), and the disagreement classes its whole programs show. "
    "The details, with reproducers, are on the report.</p>",
    f"<table><thead><tr><th>backend</th><th>pass rate</th><th>verdict</th></tr></thead><tbody>{''.join(verdicts)}"
    "</tbody></table>",
    "<h2 id=pages>The pages</h2>",
    f"<table><thead><tr><th>page</th><th>what it is for</th><th>made</th></tr></thead><tbody>{''.join(rows)}</tbody></table>",
    "<p>The main job's page (<code>reports/conformance.html</code>, refimpl's own backends) is made on the reader's own "
    "machine by the README's command; it is not published here.</p>",
    f"<h2 id=findings>Fuzz findings ({len(findings)})</h2><p>Each replays with <code>python -m refimpl.fuzz replay "
    "docs/conformance/FILE</code>; the report lists them with their details.</p>",
    f"<details><summary>the {len(findings)} files</summary><ul>{links}</ul></details>"]))


def write(out: Path, doc: dict) -> list[Path]:
  """Writes the report's page, its markdown and the index; returns their paths."""
  written = []
  for name, text in ((f"{PAGE}.html", html_page(doc)), (f"{PAGE}.md", markdown(doc)), (INDEX, index_page(out, doc))):
    (out / name).write_text(text)
    written.append(out / name)
  return written


def readme_rows(doc: dict) -> list[str]:
  """The README's table of tinygrad's backends, from the data (spec_tests/test_published_pages.py holds the README to
  it): per backend the pass rate over supported cases, the FAIL cells by kind, the failing tests and the suite's time."""
  rows = ["| backend | judged at | pass rate (supported cases) | FAIL cells by kind | failing tests | suite wall time |",
          "|---|---|---|---|---|---|"]
  for b, r in _backends(doc["results"]).items():
    s = r.get("suite")
    if s is None: continue
    kinds = ", ".join(f"{n} {rh.KIND_LABELS[k]}" for k, n in kind_counts(s).most_common()) or "none"
    rows.append(f"| TINYGRAD:{b} | {level(r)['level']} | {rh.pass_rate(s['cases'])} | {kinds} | {s.get('failed_tests', '?')} | "
                f"{s['wall_s']:.0f} s |")
  return rows
