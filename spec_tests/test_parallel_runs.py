"""`pytest spec_tests -n N` (pytest-xdist): the tests spread over worker processes and the conformance report merges
every worker's results. Rule: the report of a parallel run has the same case x backend table as a serial run of the
same tests (lane counts may differ: hypothesis draws its own examples in each process)."""
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("xdist")

HERE = pathlib.Path(__file__).parent


def table(report: pathlib.Path) -> list[str]:
  """The report's case x backend rows (the lines of its first table)."""
  return [ln for ln in report.read_text().splitlines() if ln.startswith("| ")]


def test_a_parallel_run_reports_every_workers_cases(tmp_path):
  rows = {}
  for workers in ("0", "2"):
    report = tmp_path / f"n{workers}.md"
    args = [sys.executable, "-m", "pytest", str(HERE / "test_conformance_ops.py"), "-q", "-p", "no:cacheprovider", "-n", workers,
            "-k", "sweep and (IDIV or ADD or CAST)", "--backend", "PYTHON,CLANG", "--conformance-report", str(report)]
    res = subprocess.run(args, capture_output=True, text=True, timeout=900, cwd=HERE.parent)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    rows[workers] = table(report)
  assert len(rows["0"]) > 20 and rows["2"] == rows["0"]
