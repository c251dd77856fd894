"""The published report of tinygrad's backends (refimpl.tinygrad.report.pages, from the data
refimpl.tinygrad.report.runner gathers) is a page built from the data, not markdown in a <pre>. Rules: it parses
(html.parser); it names its commit, date and command and links back to the index; its headline table has a row per
backend with the pass rate over supported cases, the FAIL cells by kind (wrong value, no render, no compile, crash,
other error) and a link to the suite report; each disagreement class has its rule, its per-backend result table and its
reproducer; each backend has an op x dtype grid whose FAIL cells name their kind and link to the reproducer's id in that
backend's suite report; each published fuzz finding links to its file (a dropped one is listed with why, without one).
The index gives each backend a verdict and links every page. The committed pages (docs/conformance) hold the same."""
from __future__ import annotations

import html
import json
import pathlib

from refimpl.testing.pytest_plugin import Conformance
from refimpl.testing.report_html import Table, parse_page
from refimpl.tinygrad.report.classes import CLASSES, suite_report
from refimpl.tinygrad.report.pages import verdict, write

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "conformance"
STATUSES = {"ADD-f32": "pass", "MAX-f32": "fail", "SHL-i32": "fail", "ADD-f16": "unsupported", "CAST-f32-to-i32": "pass"}
DETAILS = {"MAX-f32": "1 of 1 defined lanes differ from the spec", "SHL-i32": "B: SHL-i32 does not run: KeyError: SHL"}


def _doc(tmp_path: pathlib.Path) -> dict:
  """Two backends' results as conformance_report.main gathers them, with B's suite report written beside."""
  c = Conformance()
  for case, status in STATUSES.items(): c.record("TINYGRAD:B", case, status, DETAILS.get(case, f"reproducer of {case}"))
  (tmp_path / f"{suite_report('B')}.html").write_text(c.html())
  suite = {"wall_s": 12.0, "tests": "3 failed, 9 passed", "cases": {"pass": 2, "fail": 2, "unsupported": 1, "relaxed": 0},
           "statuses": STATUSES, "details": DETAILS, "failed_tests": 3, "report": f"{suite_report('B')}.html"}
  fuzz = {"summary": ["programs: 10"], "command": "python -m refimpl.fuzz --backend TINYGRAD:B --time 60",
          "findings": [{"op": "MAX", "dtypes": "float", "kind": "wrong-value:exact", "file": "fuzz/B/TINYGRAD_B-MAX-float.json",
                        "detail": "got 1.0"}],
          "dropped": [{"op": "MUL", "dtypes": "float", "kind": "refimpl-error", "file": None, "detail": "UndefinedBehavior",
                       "why": "a harness error (refimpl's own UndefinedBehavior), not the backend's"}]}
  classes = {c.id: (c.id == "max-nan-f32", "got [1.0], the spec gives [nan]") for c in CLASSES}
  results = {"B": {"suite": suite, "fuzz": fuzz, "classes": classes, "unsupported": {"f16": "f16: declared unsupported"}},
             "C": {"why": "TINYGRAD:C: does not open here"}, "_refimpl": {c.id: "CLANG" for c in CLASSES}}
  prov = {"command": "python -m refimpl.tinygrad report", "commit": "abc123", "date": "2026-01-01 00:00 UTC", "tools": {}}
  return {"provenance": prov, "fuzz_seconds": 60, "results": results}


def headline(page) -> Table:
  return next(t for t in page.tables if t.rows and any("pass rate" in c.text for c in t.rows[0]))


def test_the_published_page_is_built_from_the_data(tmp_path):
  write(tmp_path, _doc(tmp_path))
  text = (tmp_path / "tinygrad-0.10.1.html").read_text()
  page = parse_page(text)
  assert "<pre style" not in text and "| backend |" not in text and "`" not in text
  assert "commit <code>abc123</code>" in text and "href='index.html'" in text
  rows = {r[0].text: r for r in headline(page).rows[1:]}
  # judged at, pass rate, pass, FAIL: wrong, no render, no compile, crash, error, n/a, relaxed
  assert rows["TINYGRAD:B"][1].text == "rantinygrad's own runtime"
  assert [c.text for c in rows["TINYGRAD:B"][2:11]] == ["50.0% (2 of 4)", "2", "1", "1", "0", "0", "0", "1", "0"]
  assert rows["TINYGRAD:B"][-1].href == f"{suite_report('B')}.html" and "does not open" in rows["TINYGRAD:C"][1].text
  for c in CLASSES: assert f"c-{c.id}" in page.ids and c.id in text
  maxnan = next(t for t in page.tables if any(r[0].text == "TINYGRAD:B" and "[nan]" in r[-1].text for r in t.rows)
                and any(r[1].cls == "fail" for r in t.rows[1:]))
  assert maxnan.rows[1][1].text == "breaks the rule"
  alu = next(t for t in page.tables if t.caption.startswith("ALU")).grid()
  assert alu[("MAX", "f32")].cls == "fail k-wrong-value" and alu[("SHL", "i32")].cls == "fail k-render-error"
  assert alu[("ADD", "f32")].cls == "pass" and alu[("ADD", "f16")].cls == "unsupported"
  target, _, anchor = alu[("MAX", "f32")].href.partition("#")
  assert anchor in parse_page((tmp_path / target).read_text()).ids  # the link lands on the suite report's reproducer
  fuzz = [c for t in page.tables for r in t.rows for c in r if c.href and c.href.startswith("fuzz/")]
  assert [c.href for c in fuzz] == ["fuzz/B/TINYGRAD_B-MAX-float.json"]  # a dropped finding: listed with why, no file
  assert html.escape("a harness error (refimpl's own UndefinedBehavior)") in text
  assert (tmp_path / "tinygrad-0.10.1.md").read_text().startswith("# tinygrad 0.10.1")


def test_a_backend_judged_below_ran_shows_its_level_and_no_suite_report(tmp_path):
  """A device judged at compiled (refimpl.tinygrad.v0_10.standins): its row and verdict name the level and the toolchain, a
  pass is "reaches compiled", its grid links nowhere (nothing ran, so there is no suite report), its value classes are
  "not run"."""
  from refimpl.tinygrad.report.pages import markdown
  doc = _doc(tmp_path)
  suite = {**doc["results"]["B"]["suite"], "report": None, "command": "python -c judge_builds", "tests": "5 op cases built"}
  level = {"level": "compiled", "standin": "NVRTC", "hardware": "an NVIDIA GPU"}
  classes = {c.id: (None, "rendered and compiled, not run") for c in CLASSES}
  doc["results"] = {"D": {"suite": suite, "level": level, "classes": classes, "unsupported": {}}, "_refimpl": {}}
  write(tmp_path, doc)
  page = parse_page((tmp_path / "tinygrad-0.10.1.html").read_text())
  row = headline(page).rows[1]
  assert row[0].text == "TINYGRAD:D" and row[1].text == "compiledNVRTC" and row[-1].text == "-"
  alu = next(t for t in page.tables if t.caption.startswith("ALU")).grid()
  assert alu[("MAX", "f32")].cls == "fail k-wrong-value" and alu[("MAX", "f32")].href is None
  assert "TINYGRAD:D (judged at compiled (NVRTC; stands in for an NVIDIA GPU)): 50.0% (2 of 4) of the cases it supports " \
         "reach compiled" in markdown(doc)


def test_the_index_gives_a_verdict_per_backend_and_links_every_page(tmp_path):
  doc = _doc(tmp_path)
  v = verdict("B", doc["results"]["B"])
  assert v["rate"] == "50.0% (2 of 4)" and v["safe"] == ["arithmetic", "CAST"] and v["unsupported"] == ["f16"]
  assert v["unsafe"] == ["comparison and select: a wrong value: MAX on f32", "bitwise and shifts: does not render: SHL on i32"]
  write(tmp_path, doc)
  index = (tmp_path / "index.html").read_text()
  hrefs = {c.href for t in parse_page(index).tables for r in t.rows for c in r if c.href}
  assert {"tinygrad-0.10.1.html", f"{suite_report('B')}.html"} <= {h.partition("#")[0] for h in hrefs}


def test_the_committed_report_is_a_page_with_a_grid_per_backend():
  """docs/conformance/tinygrad-0.10.1.html, as regenerated: every backend of its headline has a grid, and every FAIL
  link lands on an id of a suite report that is committed beside it."""
  page = parse_page((DOCS / "tinygrad-0.10.1.html").read_text())
  backends = [r[0].text for r in headline(page).rows[1:]]
  assert {"TINYGRAD:CLANG", "TINYGRAD:WEBGPU"} <= set(backends)
  assert sum(t.caption.startswith("ALU") for t in page.tables) == len(backends)
  links = {c.href for t in page.tables if t.caption.startswith(("ALU", "CAST", "BITCAST")) for r in t.rows for c in r if c.href}
  assert links
  ids: dict[str, set[str]] = {}
  for link in sorted(links):
    target, _, anchor = link.partition("#")
    if target not in ids: ids[target] = parse_page((DOCS / target).read_text()).ids
    assert anchor in ids[target], link


def test_refimpls_own_error_is_never_published_as_a_backends_finding(tmp_path):
  """A finding of kind refimpl-error (refimpl's UndefinedBehavior raised by the harness at a launch) is listed as a
  harness error and its file removed; it is never replayed or published as the backend's."""
  from refimpl.tinygrad.report.runner import publish_findings
  source = next(iter(sorted(DOCS.glob("fuzz/CLANG/*.json"))))
  doc = json.loads(source.read_text())
  doc["signature"]["kind"], doc["detail"] = "refimpl-error", "UndefinedBehavior: a STORE's value is undefined"
  (tmp_path / "fuzz" / "CLANG").mkdir(parents=True)
  harness = tmp_path / "fuzz" / "CLANG" / "TINYGRAD_CLANG-MUL-float-refimpl-error.json"
  harness.write_text(json.dumps(doc))
  got = publish_findings("CLANG", tmp_path)
  assert got["findings"] == [] and not harness.exists()
  assert [d["why"] for d in got["dropped"]] == ["a harness error (refimpl's own UndefinedBehavior), not the backend's"]


def test_the_index_names_every_run_merged_into_the_data(tmp_path):
  """A row reported later with --merge carries its own provenance: the index says which backends, when, from which
  commit and by what command, beside the first run's header (no page claims one run made what several did)."""
  doc = _doc(tmp_path)
  doc["merged"] = [{"backends": ["QCOM"], "fuzz_seconds": 0,
                    "provenance": {"date": "2026-12-06 23:52 UTC", "commit": "14d601fd66f0", "command": "report --merge"}}]
  write(tmp_path, doc)
  index = (tmp_path / "index.html").read_text()
  assert "TINYGRAD:QCOM: reported into this page on 2026-12-06 23:52 UTC from refimpl commit 14d601fd66f0" in index
