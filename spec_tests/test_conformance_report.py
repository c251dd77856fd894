"""The conformance report (refimpl.testing.pytest_plugin.Conformance). Rules: a case x backend table with one cell per
(case, backend) holding its status; a failure outranks a pass recorded for the same cell; every FAIL and relaxed cell
links to its reproducer; the HTML page offers a filter by op and by dtype and counts each backend's statuses; results
from another process (a pytest-xdist worker) merge in by the same rule."""
import re

from refimpl.testing.pytest_plugin import Conformance


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


def test_the_html_page_colours_cells_links_failures_and_filters():
  page = sample().html()
  cells = re.findall(r"<td class='(\w*)'>(.*?)</td>", page)
  assert [status for status, _ in cells] == ["relaxed", "unsupported", "fail", "pass"]
  links = re.findall(r"href='#([\w-]+)'", page)
  assert links and all(f"id='{target}'" in page for target in links)  # every link has its reproducer on the page
  assert "expected -42, got -43" in page and "<option>IDIV</option>" in page and "<option>bf16</option>" in page
  assert "<option>f32</option>" in page and "<option>f32-to-bf16</option>" not in page  # dtypes, not pairs
  counts = re.search(r"<tr><th>CLANG</th>(.*?)</tr>", page).group(1)
  assert re.findall(r"<td class=\w+>(\d+)</td>", counts) == ["0", "1", "0", "1"]  # pass, fail, unsupported, relaxed


def test_results_from_another_process_merge_by_the_same_rule():
  worker = Conformance()
  worker.record("CLANG", "IDIV-i8", "pass", "", 7)
  worker.record("LLVM", "IDIV-i8", "fail", "wrong")
  merged = sample()
  merged.merge(worker.to_json())
  assert merged.results[("CLANG", "IDIV-i8")][0] == "fail" and merged.results[("LLVM", "IDIV-i8")] == ("fail", "wrong")
  assert merged.examples["CLANG"] == 17
