"""The conformance report (refimpl.testing.pytest_plugin.Conformance). Rules: a case x backend table with one cell per
(case, backend) holding its status; a failure outranks a pass recorded for the same cell; every FAIL and relaxed cell
links to its reproducer; the HTML page is an op x dtype grid per backend and counts each backend's statuses; results
from another process (a pytest-xdist worker) merge in by the same rule."""
from refimpl.testing.pytest_plugin import Conformance
from refimpl.testing.report_html import parse_page


def sample() -> Conformance:
  c = Conformance()
  c.record("CLANG", "IDIV-i8", "pass", "", 10)
  c.record("CLANG", "IDIV-i8", "fail", "IDIV on int8: expected -42, got -43")
  c.record("CLANG", "IDIV-i8", "pass")  # a later pass does not hide the failure
  c.record("CLANG", "CAST-f32-to-bf16", "relaxed", "declared inexact")
  c.record("GPU", "IDIV-i8", "pass", "", 5)
  c.record("GPU", "CAST-f32-to-bf16", "unsupported", "no bfloat16")
  return c


def test_a_failure_outranks_a_pass_of_the_same_cell():
  assert sample().results[("CLANG", "IDIV-i8")] == ("fail", "IDIV on int8: expected -42, got -43")


def test_the_markdown_table_has_a_cell_per_case_and_backend():
  rows = [ln for ln in sample().markdown().splitlines() if ln.startswith("| ")]
  assert rows == ["| case | CLANG | GPU |", "| CAST-f32-to-bf16 | relaxed | unsupported |", "| IDIV-i8 | **FAIL** | pass |"]


def test_the_html_page_is_an_op_by_dtype_grid_per_backend_with_failures_linked():
  """The page parses (html.parser); per backend, an ALU grid (ops as rows, dtypes as columns) and a CAST grid (source
  rows, target columns) hold one coloured cell per case; every FAIL / relaxed cell links to its reproducer on the page;
  the counts table has each backend's statuses."""
  page = parse_page(sample().html())
  grids = [t for t in page.tables if t.caption.startswith(("ALU", "CAST"))]
  assert [t.caption.split()[0] for t in grids] == ["ALU", "CAST", "ALU", "CAST"]  # CLANG's, then GPU's
  clang_alu, clang_cast, gpu_alu, gpu_cast = (t.grid() for t in grids)
  assert (clang_alu[("IDIV", "i8")].cls, clang_alu[("IDIV", "i8")].text) == ("fail", "FAIL")
  assert (clang_cast[("f32", "bf16")].cls, gpu_cast[("f32", "bf16")].cls) == ("relaxed", "unsupported")
  assert gpu_alu[("IDIV", "i8")].cls == "pass" and gpu_alu[("IDIV", "i8")].href is None
  links = [c.href for g in (clang_alu, clang_cast) for c in g.values() if c.cls in ("fail", "relaxed")]
  assert len(links) == 2 and all(h.startswith("#") and h[1:] in page.ids for h in links)
  counts = {r[0].text: [c.text for c in r[1:5]] for r in page.tables[0].rows[1:]}
  assert counts == {"CLANG": ["0", "1", "0", "1"], "GPU": ["1", "0", "1", "0"]}  # pass, fail, unsupported, relaxed
  assert "expected -42, got -43" in sample().html()


def test_results_from_another_process_merge_by_the_same_rule():
  worker = Conformance()
  worker.record("CLANG", "IDIV-i8", "pass", "", 7)
  worker.record("LLVM", "IDIV-i8", "fail", "wrong")
  merged = sample()
  merged.merge(worker.to_json())
  assert merged.results[("CLANG", "IDIV-i8")][0] == "fail" and merged.results[("LLVM", "IDIV-i8")] == ("fail", "wrong")
  assert merged.examples["CLANG"] == 17
