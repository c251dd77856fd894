"""The conformance report (refimpl.testing.pytest_plugin.Conformance). Rules: a case x backend table with one cell per
(case, backend) holding its status; a failure outranks a pass recorded for the same cell; every FAIL and relaxed cell
links to its reproducer; the HTML page is an op x dtype grid per backend and counts each backend's statuses; results
from another process (a pytest-xdist worker) merge in by the same rule. A FAIL names its kind (a wrong value, a kernel
that does not render, does not compile, crashes), in the grid, the hover text and the JSON; every failing test is on the
page with the command that reruns it, failures of one kind and message grouped."""
import json

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
  c.record("GPU", "SHL-i32", "fail", "GPU: SHL-i32 does not run: KeyError: <Ops.SHL: 54>")
  c.record("GPU", "NEG-u32", "fail", "GPU: NEG-u32 does not run: CompileError: error: /root/.cache/k/x.cl:4:8: no")
  return c


def test_a_failure_outranks_a_pass_of_the_same_cell():
  assert sample().results[("CLANG", "IDIV-i8")] == ("fail", "IDIV on int8: expected -42, got -43")


def test_the_markdown_table_has_a_cell_per_case_and_backend():
  rows = [ln for ln in sample().markdown().splitlines() if ln.startswith("| ")]
  assert rows == ["| case | CLANG | GPU |", "| CAST-f32-to-bf16 | relaxed | unsupported |", "| IDIV-i8 | **FAIL** | pass |",
                  "| NEG-u32 |  | **FAIL** |", "| SHL-i32 |  | **FAIL** |"]


def test_the_html_page_is_an_op_by_dtype_grid_per_backend_with_failures_linked():
  """The page parses (html.parser); per backend, an ALU grid (ops as rows, dtypes as columns) and a CAST grid (source
  rows, target columns) hold one coloured cell per case; every FAIL / relaxed cell links to its reproducer on the page;
  the counts table has each backend's statuses."""
  page = parse_page(sample().html())
  grids = [t for t in page.tables if t.caption.startswith(("ALU", "CAST"))]
  assert [t.caption.split()[0] for t in grids] == ["ALU", "CAST", "ALU", "CAST"]  # CLANG's, then GPU's
  clang_alu, clang_cast, gpu_alu, gpu_cast = (t.grid() for t in grids)
  assert (clang_alu[("IDIV", "i8")].cls, clang_alu[("IDIV", "i8")].text) == ("fail k-wrong-value", "wrong")
  assert (gpu_alu[("SHL", "i32")].cls, gpu_alu[("NEG", "u32")].cls) == ("fail k-render-error", "fail k-compile-error")
  assert (clang_cast[("f32", "bf16")].cls, gpu_cast[("f32", "bf16")].cls) == ("relaxed", "unsupported")
  assert gpu_alu[("IDIV", "i8")].cls == "pass" and gpu_alu[("IDIV", "i8")].href is None
  links = [c.href for g in (clang_alu, clang_cast) for c in g.values() if c.cls.split()[0] in ("fail", "relaxed")]
  assert len(links) == 2 and all(h.startswith("#") and h[1:] in page.ids for h in links)
  counts = {r[0].text: [c.text for c in r[1:7]] for r in page.tables[0].rows[1:]}
  # pass rate (over supported cases), pass, fail, unsupported, relaxed, FAIL by kind
  assert counts == {"CLANG": ["0.0% (0 of 2)", "0", "1", "0", "1", "1 wrong"],
                    "GPU": ["33.3% (1 of 3)", "1", "2", "1", "0", "1 no render, 1 no compile"]}
  assert "expected -42, got -43" in sample().html() and "/root/" not in sample().html()


def test_every_failing_test_is_listed_grouped_with_its_rerun_command():
  c = sample()
  for k in (1, 2): c.failed_tests.append({"backend": "GPU", "test": f"t.py::test_shl[GPU-SHL-i{k * 32}]",
                                          "message": f"GPU: SHL-i{k * 32} does not run: KeyError: <Ops.SHL: 54>"})
  c.failed_tests.append({"backend": "GPU", "test": "t.py::test_max[GPU]", "message": "assert nan == 1.0"})
  groups = c.failure_groups()
  assert [(g["backend"], len(g["tests"])) for g in groups] == [("GPU", 2), ("GPU", 1)]
  assert groups[0]["kind"].startswith("does not render")
  page = c.html()
  assert "python -m pytest &#x27;t.py::test_shl[GPU-SHL-i64]&#x27; --backend GPU" in page
  assert "t.py::test_max[GPU]" in page and c.to_json()["kinds"] == [["CLANG", "IDIV-i8", "wrong-value"],
                                                                    ["GPU", "SHL-i32", "render-error"],
                                                                    ["GPU", "NEG-u32", "compile-error"]]


def test_results_from_another_process_merge_by_the_same_rule():
  worker = Conformance()
  worker.record("CLANG", "IDIV-i8", "pass", "", 7)
  worker.record("LLVM", "IDIV-i8", "fail", "wrong")
  merged = sample()
  merged.merge(worker.to_json())
  assert merged.results[("CLANG", "IDIV-i8")][0] == "fail" and merged.results[("LLVM", "IDIV-i8")] == ("fail", "wrong")
  assert merged.examples["CLANG"] == 17


def test_the_pages_rebuild_from_the_json_as_they_were():
  c = sample()
  c.failed_tests.append({"backend": "GPU", "test": "t.py::test_max[GPU]", "message": "assert nan == 1.0"})
  c.provenance, c.up = {"command": "cmd", "commit": "abc", "date": "today"}, "index.html"
  again = Conformance.from_json(json.loads(json.dumps(c.to_json())))
  assert (again.html(), again.markdown()) == (c.html(), c.markdown())


def test_a_failing_tests_kind_reads_a_failed_assert_as_a_wrong_result_not_a_refused_render():
  """A failing test's kind (the pages group failures by it): a kernel the op suite says did not run is the kind its
  error gives (a renderer's AssertionError: does not render); a test's own failed assert is a wrong result, never a
  renderer's refusal; a compile error is one wherever it is raised."""
  from refimpl.testing.pytest_plugin import test_kind
  from refimpl.testing.report_html import KIND_MEANING
  assert test_kind("DEV: MAX-f32 does not run: AssertionError: no code for MAX") == KIND_MEANING["render-error"]
  assert test_kind("AssertionError: 64310 of 65536 defined lanes differ from the spec").startswith("a wrong result")
  assert test_kind("CompileError: <source>:3: error: expected ';'") == KIND_MEANING["compile-error"]
