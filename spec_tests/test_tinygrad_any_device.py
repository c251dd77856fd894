"""Any tinygrad 0.10.1 device under the suite (refimpl.tinygrad.backend): TINYGRAD:<NAME> for tinygrad's own devices and
TINYGRAD:<module>:<Class> for a porter's. Rules:
- a device that does not open here says why, and what to install; one that cannot compute (DISK, NPY) is refused;
- what differs between tinygrad devices (grid or loops, locals, limits, how a program is launched) is read from the
  tinygrad device and its renderer, and refimpl's lowering obeys it (a launch over the renderer's limit is refused);
- a dtype is supported only when a probe kernel of it renders, compiles and runs (WEBGPU's WGSL renderer has no half,
  int64, float64: unsupported, with the reason);
- a porter's device outside the checkout (spec_tests/third_party/my_tinygrad_device: a faithful port and one with XOR
  rendered as OR) is judged by `python -m refimpl.conformance --backend TINYGRAD:<module>:<Class>` run from elsewhere:
  the planted difference is reported as FAIL with a reproducer, a known failure declared in an xfail file passes the
  run, and the faithful port passes the slice tinygrad's CLANG passes; other processes open it by name (spawned workers).
Skipped only when tinygrad is not installed (it is in the dev extra), WEBGPU's where wgpu finds no adapter."""
from __future__ import annotations

import json
import multiprocessing
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.ir import Ops, ProgramError, elementwise
from refimpl.lower import lower_for
from refimpl.testing import eval_op

pytest.importorskip("tinygrad")
from tinygrad.device import Compiled as TinygradCompiled
from tinygrad.runtime.ops_python import PythonAllocator, PythonCompiler, PythonProgram, PythonRenderer

THIRD_PARTY = pathlib.Path(__file__).parent / "third_party"
MYDEV = "TINYGRAD:my_tinygrad_device.ops_mydev:MyDevice"
PLANTED = "TINYGRAD:my_tinygrad_device.ops_mydev:PlantedDevice"


class SmallGridRenderer(PythonRenderer):
  """tinygrad's PYTHON renderer declaring a small grid and no shared memory."""
  global_max = (64, 1, 1)
  local_max = (8, 1, 1)
  has_shared = False


class SmallGridDevice(TinygradCompiled):
  """tinygrad's PYTHON device with SmallGridRenderer (a grid device whose runtime takes global_size / local_size)."""
  def __init__(self, device: str):
    super().__init__(device, PythonAllocator(), SmallGridRenderer(), PythonCompiler(), PythonProgram)


@pytest.fixture
def third_party_path(monkeypatch):
  monkeypatch.syspath_prepend(str(THIRD_PARTY))


def test_a_tinygrad_device_that_does_not_open_says_why_and_what_to_install():
  if sys.platform == "darwin": pytest.skip("METAL opens on macOS")
  why = Device.open_error("TINYGRAD:METAL")
  assert why is not None and "TINYGRAD:METAL" in why and "needs macOS" in why
  unknown = Device.open_error("TINYGRAD:NOSUCH")
  assert unknown is not None and "CLANG" in unknown and "WEBGPU" in unknown and "<module>:<Class>" in unknown


def test_a_tinygrad_device_without_a_renderer_and_runtime_is_not_tested():
  why = Device.open_error("TINYGRAD:NPY")
  assert why is not None and "not a compute device" in why


def test_grid_limits_and_locals_are_read_from_the_tinygrad_renderer():
  """The renderer's global_max / local_max / has_shared become the refimpl renderer's; a launch over them is refused
  by refimpl's lowering (a capability error), one within them runs and agrees with the spec."""
  dev = Device[f"TINYGRAD:{__name__}:SmallGridDevice"]
  r = dev.renderer
  assert (r.global_max, r.local_max, r.has_local, r.has_shared, r.grid_as_loops) == ((64, 1, 1), (8, 1, 1), True, False, False)
  with pytest.raises(ProgramError, match="exceeds"): lower_for(elementwise(Ops.ADD, dtypes.int32, n=128), r)
  assert eval_op(Ops.ADD, np.arange(100, dtype=np.int32), np.int32(1), device=dev.device).tolist() == list(range(1, 101))


def test_a_renderer_without_a_grid_gets_loops_and_a_launch_without_grid_arguments():
  """tinygrad's CLANG renderer has no global grid (global_max None): programs are lowered to loops, and its CPUProgram
  is launched with the buffers only; a grid runtime (PYTHON's) takes global_size."""
  clang, python = Device["TINYGRAD:CLANG"], Device["TINYGRAD:PYTHON"]
  assert clang.renderer.grid_as_loops and not python.renderer.grid_as_loops
  assert clang.renderer.has_shared == clang.tg.renderer.has_shared
  from refimpl.tinygrad.backend import takes_grid
  assert not takes_grid(clang.tg.runtime("k", clang.tg.compiler.compile("void k(int* restrict o) { o[0] = 1; }")))
  assert takes_grid(PythonProgram.__call__)


def test_webgpu_refuses_the_dtypes_its_wgsl_renderer_cannot_render():
  why = Device.open_error("TINYGRAD:WEBGPU")
  if why is not None: pytest.skip(f"TINYGRAD:WEBGPU does not open here: {why}")
  dev = Device["TINYGRAD:WEBGPU"]
  for dt in (dtypes.float16, dtypes.int64, dtypes.float64):
    assert not dev.supports_dtype(dt) and "KeyError" in dev.unsupported_reasons[dt]
  assert dev.supports_dtype(dtypes.float32) and dev.renderer.global_max == (65535, 65535, 65535)
  got = eval_op(Ops.ADD, np.array([1.5, -2], np.float32), np.array([0.25, 2], np.float32), device="TINYGRAD:WEBGPU")
  assert got.tolist() == [1.75, 0.0]


def test_a_porters_device_computes_through_eval_op(third_party_path):
  """XOR (SPEC.md, bitwise: exclusive or) on the faithful port, and OR where the planted renderer has XOR as OR."""
  a, b = np.array([0b1100, -1], np.int32), np.array([0b1010, 5], np.int32)
  assert eval_op(Ops.XOR, a, b, device=MYDEV).tolist() == [0b0110, -1 ^ 5]
  assert eval_op(Ops.XOR, a, b, device=PLANTED).tolist() == [0b1110, -1]


def _device_of(name: str, queue) -> None:
  from refimpl.device import Device
  try: queue.put(Device[name].device)
  except Exception as e: queue.put(f"{type(e).__name__}: {e}")


def test_a_spawned_process_opens_a_porters_device_by_name(third_party_path):
  """A spawned worker (the fuzzer's, pytest-xdist's) imports the class by the name alone."""
  ctx = multiprocessing.get_context("spawn")
  queue = ctx.Queue()
  proc = ctx.Process(target=_device_of, args=(MYDEV, queue))
  proc.start()
  proc.join(120)
  assert queue.get(timeout=5) == MYDEV


SLICE = ["*-XOR-*", "*-AND-i32*", "*threefry*"]  # shows the planted XOR; tinygrad's CLANG passes all of it


def _conformance(tmp_path: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(THIRD_PARTY), *filter(None, [os.environ.get("PYTHONPATH")])])}
  only = [x for p in SLICE for x in ("--only", p)]
  return subprocess.run([sys.executable, "-m", "refimpl.conformance", "--quick", *only, *args], capture_output=True,
                        text=True, timeout=900, cwd=tmp_path, env=env)


def test_a_porters_tinygrad_device_is_judged_from_outside_the_checkout(tmp_path):
  """The worked example of docs/porting.md: the planted XOR fails with a reproducer, the faithful port passes the slice;
  with the known failure declared in an xfail file the run passes."""
  res = _conformance(tmp_path, "--backend", PLANTED, "--backend", MYDEV, "--report", "reports/mydev.html")
  assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-2000:]
  doc = json.loads((tmp_path / "reports" / "mydev.json").read_text())
  status = {(b, c): s for b, c, s, _ in doc["results"]}
  planted = {c: s for (b, c), s in status.items() if b == PLANTED}
  assert planted and all(s == "fail" for c, s in planted.items() if c.startswith("XOR-")), planted
  assert planted["AND-i32"] == "pass"
  assert {s for (b, _), s in status.items() if b == MYDEV} == {"pass"}
  report = (tmp_path / "reports" / "mydev.md").read_text()
  assert "XOR on dtypes.int breaks the spec" in report and f"device='{PLANTED}'" in report  # the reproducer line
  failed = [ln for ln in res.stdout.splitlines() if ln.startswith("FAILED")]
  assert any("threefry" in ln and PLANTED in ln for ln in failed) and not any(MYDEV in ln for ln in failed)
  (tmp_path / "known.txt").write_text("# XOR is rendered as OR, to be fixed\n*PlantedDevice-XOR-*\n*threefry*PlantedDevice*\n")
  res = _conformance(tmp_path, "--backend", PLANTED, "--xfail-file", "known.txt")
  assert res.returncode == 0 and " xfailed" in res.stdout, res.stdout[-3000:]
