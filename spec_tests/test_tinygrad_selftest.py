"""`python -m refimpl.tinygrad selftest` (refimpl.tinygrad.selftest): tinygrad 0.10.1's own tests on the reference
device. Rule: a tinygrad program the spec defines runs on REFIMPL as on tinygrad's own devices, so tinygrad's tests that
both its CLANG and PYTHON devices pass also pass on REFIMPL (but for the ones that rely on undefined behaviour, which
the table lists as findings)."""
from __future__ import annotations

import html.parser
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tinygrad")

from refimpl.tinygrad.selftest import FileRun, cache_dir, failure_class, fetch_sdist, html_page, markdown, refimpl_only, selftest


def _runs() -> list[FileRun]:
  ok, ub = "passed", "failed"
  return [FileRun("test_a.py", "REFIMPL", 1.0, {"T::x": ok, "T::y": ub, "T::z": ub}, {"T::y": "KernelUndefinedBehavior: ...",
                                                                                     "T::z": "TranslationError: uop 3"}),
          FileRun("test_a.py", "CLANG", 1.0, {"T::x": ok, "T::y": ok, "T::z": ub}),
          FileRun("test_a.py", "PYTHON", 1.0, {"T::x": ok, "T::y": ok, "T::z": ok})]

def test_the_table_lists_exactly_the_failures_clang_and_python_both_pass():
  """A REFIMPL failure is listed when CLANG and PYTHON both pass the test, with its class; the pages hold the table."""
  only = refimpl_only(_runs())
  assert [(f, t) for f, t, _ in only] == [("test_a.py", "T::y")]
  assert failure_class(only[0][2]).startswith("undefined behaviour") and failure_class("TranslationError: x").startswith("not")
  md = markdown(_runs(), ["REFIMPL", "CLANG", "PYTHON"], "cmd")
  assert "| test_a.py | 1 passed, 2 failed, 0 skipped, 1 s |" in md and "(1 of them pass on CLANG and PYTHON)" in md
  assert "| test_a.py | T::y | undefined" in md and "| test_a.py | T::z | not translatable by refimpl's importer | failed |" in md
  cells: list[str] = []
  class Cells(html.parser.HTMLParser):
    def handle_data(self, data): cells.append(data)
  Cells().feed(html_page(_runs(), ["REFIMPL", "CLANG", "PYTHON"], "cmd"))
  assert "T::y" in cells and "1 passed, 2 failed, 0 skipped" in cells


def test_the_sdist_is_cached_under_the_one_cache_root_refimpl_names(tmp_path, monkeypatch):
  """One variable names refimpl's cache root ($REFIMPL_CACHE_DIR, refimpl.helpers.cache_dir): the selftest's sdist lies
  under it, as the compiled kernels do."""
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  assert cache_dir("0.10.1") == tmp_path / "tinygrad-0.10.1"


def test_refimpl_is_compared_with_the_devices_of_the_run():
  """A REFIMPL failure is judged against the other devices that ran (tinygrad 0.14's CPU and PYTHON, not 0.10.1's
  CLANG): listed as REFIMPL's only when all of them pass the test, with a column per device."""
  runs = [FileRun(r.file, "CPU" if r.device == "CLANG" else r.device, r.seconds, r.outcomes, r.errors) for r in _runs()]
  assert [(f, t) for f, t, _ in refimpl_only(runs)] == [("test_a.py", "T::y")]
  md = markdown(runs, ["REFIMPL", "CPU", "PYTHON"], "cmd")
  assert "(1 of them pass on CPU and PYTHON)" in md and "| file | test | class | CPU | PYTHON | error |" in md
  assert "CLANG" not in md
  assert "CLANG" not in html_page(runs, ["REFIMPL", "CPU", "PYTHON"], "cmd")


def test_tinygrads_tiny_and_uops_tests_pass_on_the_reference(tmp_path):
  """tinygrad's test_tiny (symbolic shapes included) and test_uops (hand-built kernels with unsized pointers, locals
  and barriers) on REFIMPL: no test fails."""
  try: fetch_sdist()
  except RuntimeError as e: pytest.skip(f"tinygrad's sdist cannot be fetched here: {e}")
  runs = selftest(["test_tiny.py", "test_uops.py"], ["REFIMPL"], tmp_path, log=lambda _: None)
  for r in runs: assert not r.crashed and r.count("failed") == 0 and r.count("passed") >= 10, (r.file, r.errors, r.crashed)
  assert (tmp_path / "tinygrad-selftest.html").exists()


def test_a_failure_of_the_environment_is_shown_apart_and_the_page_has_totals_and_reproducer_links(tmp_path):
  """A missing module, no network or a collection failure is the environment's (amber), never the device's (red); the
  page gives the totals the markdown has, links each saved undefined-behaviour reproducer, and rebuilds from its JSON."""
  from refimpl.testing.report_html import parse_page
  from refimpl.tinygrad.selftest import ENVIRONMENT, rebuild_pages, save_runs, write_pages
  env = FileRun("test_b.py", "REFIMPL", 2.0, {"T::t": "failed", "T::u": "passed"},
                {"T::t": "ModuleNotFoundError: No module named 'torch'"})
  ub = FileRun("test_c.py", "REFIMPL", 2.0, {"T::v": "failed"}, {"T::v": "KernelUndefinedBehavior: kernel E_n33"})
  assert failure_class(env.errors["T::t"]) == ENVIRONMENT and failure_class("collection failure") == ENVIRONMENT
  (tmp_path / "tinygrad-selftest-undefined").mkdir()
  for kernel in ("E_n33", "E_n135"): (tmp_path / "tinygrad-selftest-undefined" / f"{kernel}.json").write_text("{}")
  runs, prov = [*_runs(), env, ub], {"command": "cmd", "commit": "abc", "date": "today", "tools": {}}
  save_runs(tmp_path, "0.10.1", runs, ["REFIMPL", "CLANG", "PYTHON"], prov)
  write_pages(tmp_path, "0.10.1", runs, ["REFIMPL", "CLANG", "PYTHON"], prov)
  page = parse_page((tmp_path / "tinygrad-selftest.html").read_text())
  cells = {r[0].text: r for r in page.tables[0].rows if r}  # the counts table
  assert cells["test_b.py"][1].cls == "relaxed" and cells["test_a.py"][1].cls == cells["test_c.py"][1].cls == "fail"
  assert failure_class("FileNotFoundError: [Errno 2] No such file or directory: 'clang'") == ENVIRONMENT
  assert [c.text for c in cells["total passed"][1:]] == ["2", "2", "3"]
  text = (tmp_path / "tinygrad-selftest.html").read_text()  # the reproducers its failures name, not another line's
  assert "href='tinygrad-selftest-undefined/E_n33.json'" in text and "E_n135" not in text
  before = (tmp_path / "tinygrad-selftest.html").read_text()
  (tmp_path / "tinygrad-selftest.html").unlink()
  rebuild_pages(tmp_path)
  assert (tmp_path / "tinygrad-selftest.html").read_text() == before


CHECKOUT_TESTS = '''
import numpy as np
from tinygrad import Tensor

def test_add():
  assert (Tensor([1, 2, 3]) + 1).tolist() == [2, 3, 4]

def test_divides_by_zero():
  (Tensor(np.array([7], dtype=np.int32)) // Tensor(np.array([0], dtype=np.int32))).realize()
'''


def _checkout(root: Path, version: str) -> Path:
  (root / "test").mkdir(parents=True)
  (root / "test" / "test_mini.py").write_text(CHECKOUT_TESTS)
  (root / "setup.py").write_text(f"from setuptools import setup\nsetup(name='tinygrad', version='{version}')\n")
  return root


def test_selftest_runs_the_tests_of_a_checkout_of_the_installed_version(tmp_path):
  """`selftest --tests CHECKOUT` runs test/<file> of the user's tinygrad checkout on REFIMPL: its passing test passes,
  and a test that divides an int by zero fails as undefined behaviour (the spec: IDIV by 0 is undefined), in the table."""
  from refimpl.tinygrad.lines import installed
  checkout = _checkout(tmp_path / "tinygrad", installed())
  res = subprocess.run([sys.executable, "-m", "refimpl.tinygrad", "selftest", "--tests", str(checkout), "--files",
                        "test_mini.py", "--devices", "REFIMPL", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=900, cwd=tmp_path)
  assert res.returncode == 0, res.stderr[-3000:]
  assert "test_mini.py on REFIMPL: 1 passed, 1 failed, 0 skipped" in res.stderr, res.stderr[-3000:]
  md = (tmp_path / "out" / "tinygrad-selftest.md").read_text()
  assert "test_divides_by_zero | undefined behaviour" in md and "--tests tinygrad" in md, md


@pytest.mark.parametrize("make, says", [
  (lambda root: _checkout(root, "0.9.0"), "is tinygrad 0.9.0; the installed tinygrad is"),
  (lambda root: root.mkdir() or root, "has no test/ folder"),
  (lambda root: _checkout(root, "0.10.1") and root, "no such test file"),
])
def test_selftest_refuses_a_folder_that_is_not_a_checkout_of_the_installed_version(tmp_path, make, says):
  """A --tests folder without test/, of another tinygrad version, or without the named file is a usage error (exit 2)
  that says which, before anything runs."""
  checkout = make(tmp_path / "tinygrad")
  files = "test_absent.py" if says == "no such test file" else "test_mini.py"
  res = subprocess.run([sys.executable, "-m", "refimpl.tinygrad", "selftest", "--tests", str(checkout), "--files", files,
                        "--devices", "REFIMPL", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
  assert res.returncode == 2 and says in res.stderr, res.stderr[-2000:]


def test_a_reproducer_is_named_as_the_page_links_it_never_by_a_machine_path(tmp_path):
  """A REFIMPL failure's message names its reproducer relative to the page (the folder beside it), so a published
  table carries no path of the machine that ran the tests."""
  from refimpl.tinygrad.selftest import page_relative
  save = tmp_path / "out" / "tinygrad-selftest-undefined"
  message = f"tinygrad kernel r_a: index 3 is outside [0, 3) (reproducer: python -m refimpl.fuzz replay {save}/r_a.json)"
  shown = page_relative(message, save)
  assert str(tmp_path) not in shown and shown.endswith("replay tinygrad-selftest-undefined/r_a.json)"), shown
