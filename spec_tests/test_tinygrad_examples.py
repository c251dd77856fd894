"""The training scripts of examples/ (tinygrad programs: an MLP with SGD and with Adam, a CNN with BatchNorm, attention
forward and backward, a symbolic batch). Rule: each is defined by the spec, so it runs whole on the REFIMPL device with
no undefined behaviour and nothing untranslatable, and what it prints agrees with tinygrad's CLANG within float32
rounding (tinygrad's CLANG contracts a*b+c and reorders sums: `run --check CLANG` reports those per kernel)."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tinygrad")

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = {"mlp-sgd": ["examples/mlp.py"], "mlp-adam": ["examples/mlp.py", "--optimizer", "adam"],
            "cnn": ["examples/cnn.py"], "attention": ["examples/attention.py"], "symbolic-batch": ["examples/symbolic_batch.py"]}
NUMBER = re.compile(r"-?\d+\.\d+(?:e[-+]?\d+)?")


ON_CLANG = ("import runpy, sys; from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad; prepare_tinygrad(); "
            "from tinygrad import Device; Device.DEFAULT = 'CLANG'; sys.argv = sys.argv[1:]; "
            "runpy.run_path(sys.argv[0], run_name='__main__')")

def _run(*args: str) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", "refimpl.tinygrad", "run", *args], capture_output=True, text=True,
                        timeout=900, cwd=ROOT)

def _on_clang(*script: str) -> subprocess.CompletedProcess:
  """The script on tinygrad's own CLANG device (refimpl's toolchain for its compiler)."""
  return subprocess.run([sys.executable, "-c", ON_CLANG, *script], capture_output=True, text=True, timeout=900, cwd=ROOT)

def _results(stdout: str) -> list[float]:
  """The numbers a script prints about its results (not its timing line)."""
  return [float(x) for line in stdout.splitlines() if "kernels in" not in line for x in NUMBER.findall(line)]


def test_every_example_is_tested():
  assert {a[0] for a in EXAMPLES.values()} == {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py")}

@pytest.mark.parametrize("example", EXAMPLES)
def test_example_runs_on_the_reference_and_agrees_with_tinygrads_clang(example):
  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  script = EXAMPLES[example]
  ref = _run("--", *script)
  assert ref.returncode == 0 and "0 with undefined behaviour, 0 not translatable" in ref.stderr, ref.stderr[-2000:]
  assert re.search(r"\d+ kernels in \d", ref.stdout), ref.stdout
  why = prepare_tinygrad()["CLANG"]
  if why is not None: pytest.skip(f"tinygrad's CLANG does not run here: {why}")
  clang = _on_clang(*script)
  assert clang.returncode == 0, clang.stderr[-2000:]
  got, want = _results(ref.stdout), _results(clang.stdout)
  assert len(got) == len(want) > 0 and np.allclose(got, want, rtol=1e-4, atol=1e-5), (got, want)
