"""The published report of tinygrad's backends (refimpl.tinygrad.conformance_report) is a page built from the data,
not markdown in a <pre>. Rules: it parses (html.parser); its headline table has a row per backend with the case counts
and a link to the suite report; each disagreement class has its rule, its per-backend result table and its reproducer;
each backend has an op x dtype grid whose FAIL cells link to the reproducer's id in that backend's suite report (the
suite report's own anchors); each fuzz finding links to its file (one whose reduction stopped early is listed without
one). The committed page (docs/conformance) holds the same."""
from __future__ import annotations

import html
import pathlib

from refimpl.testing.pytest_plugin import Conformance
from refimpl.testing.report_html import parse_page
from refimpl.tinygrad.conformance_report import CLASSES, suite_report, write

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs" / "conformance"
STATUSES = {"ADD-f32": "pass", "MAX-f32": "fail", "ADD-f16": "unsupported", "CAST-f32-to-i32": "pass"}


def _results(tmp_path: pathlib.Path) -> dict:
  """Two backends' results as conformance_report.main gathers them, with B's suite report written beside."""
  c = Conformance()
  for case, status in STATUSES.items(): c.record("TINYGRAD:B", case, status, f"reproducer of {case}")
  (tmp_path / f"{suite_report('B')}.html").write_text(c.html())
  suite = {"wall_s": 12.0, "tests": "3 failed, 9 passed", "cases": {"pass": 2, "fail": 1, "unsupported": 1, "relaxed": 0},
           "statuses": STATUSES, "report": f"{suite_report('B')}.html"}
  fuzz = {"summary": ["programs: 10"], "findings": [{"op": "MAX", "dtypes": "float", "kind": "wrong-value:exact",
                                                      "file": "fuzz/B/TINYGRAD_B-MAX-float.json", "detail": "got 1.0"},
                                                     {"op": "ADD", "dtypes": "int", "kind": "render-error", "file": None,
                                                      "detail": "[not reduced: the reducer stopped early] KeyError"}]}
  classes = {c.id: (c.id == "max-nan-f32", "got [1.0], the spec gives [nan]") for c in CLASSES}
  return {"B": {"suite": suite, "fuzz": fuzz, "classes": classes, "unsupported": {"f16": "f16: KeyError"}},
          "C": {"why": "TINYGRAD:C: does not open here"}, "_refimpl": {c.id: "CLANG" for c in CLASSES}}


def test_the_published_page_is_built_from_the_data(tmp_path):
  write(tmp_path, _results(tmp_path), 60, "python -m refimpl.tinygrad report")
  text = (tmp_path / "tinygrad-0.10.1.html").read_text()
  page = parse_page(text)
  assert "<pre style" not in text and "| backend |" not in text
  headline = page.tables[0]
  rows = {r[0].text: r for r in headline.rows[1:]}
  assert [c.text for c in rows["TINYGRAD:B"][1:5]] == ["2", "1", "1", "0"]  # pass, FAIL, n/a, relaxed
  assert rows["TINYGRAD:B"][-1].href == f"{suite_report('B')}.html" and "does not open" in rows["TINYGRAD:C"][1].text
  for c in CLASSES: assert f"c-{c.id}" in page.ids and html.escape(c.rule) in text
  maxnan = next(t for t in page.tables if any(r[0].text == "TINYGRAD:B" and "[nan]" in r[-1].text for r in t.rows)
                and any(r[1].cls == "fail" for r in t.rows[1:]))
  assert maxnan.rows[1][1].text == "breaks the rule"
  alu = next(t for t in page.tables if t.caption.startswith("ALU")).grid()
  assert alu[("MAX", "f32")].cls == "fail" and alu[("ADD", "f32")].cls == "pass" and alu[("ADD", "f16")].cls == "unsupported"
  target, _, anchor = alu[("MAX", "f32")].href.partition("#")
  assert anchor in parse_page((tmp_path / target).read_text()).ids  # the link lands on the suite report's reproducer
  fuzz = [c for t in page.tables for r in t.rows for c in r if c.href and c.href.startswith("fuzz/")]
  assert [c.href for c in fuzz] == ["fuzz/B/TINYGRAD_B-MAX-float.json"]  # a finding the reducer did not finish: no file
  assert any(c.text == "not kept (not reduced)" for t in page.tables for r in t.rows for c in r)
  assert (tmp_path / "tinygrad-0.10.1.md").read_text().startswith("# tinygrad 0.10.1")


def test_the_committed_report_is_a_page_with_a_grid_per_backend():
  """docs/conformance/tinygrad-0.10.1.html, as regenerated: every backend of its headline has a grid, and every FAIL
  link lands on an id of a suite report that is committed beside it."""
  page = parse_page((DOCS / "tinygrad-0.10.1.html").read_text())
  backends = [r[0].text for r in page.tables[0].rows[1:]]
  assert {"TINYGRAD:CLANG", "TINYGRAD:WEBGPU"} <= set(backends)
  assert sum(t.caption.startswith("ALU") for t in page.tables) == len(backends)
  links = {c.href for t in page.tables if t.caption.startswith(("ALU", "CAST", "BITCAST")) for r in t.rows for c in r if c.href}
  assert links
  ids: dict[str, set[str]] = {}
  for link in sorted(links):
    target, _, anchor = link.partition("#")
    if target not in ids: ids[target] = parse_page((DOCS / target).read_text()).ids
    assert anchor in ids[target], link
