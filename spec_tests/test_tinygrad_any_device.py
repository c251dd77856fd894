"""Any tinygrad 0.10.1 device under the suite (refimpl.tinygrad.v0_10.backend): TINYGRAD:<NAME> for tinygrad's own devices and
TINYGRAD:<module>:<Class> for a porter's. Rules:
- a device that does not open here says why, and what to install; one that cannot compute (DISK, NPY) is refused;
- what differs between tinygrad devices (grid or loops, locals, limits, how a program is launched) is read from the
  tinygrad device and its renderer, and refimpl's lowering obeys it (a launch over the renderer's limit is refused);
- "unsupported" is the device's own declaration: a dtype is supported exactly when tinygrad declares it
  (is_dtype_supported), whether or not its kernels compile; a device opens only when its smallest kernel runs;
- a porter's device outside the checkout (spec_tests/third_party/my_tinygrad_device: faithful, equivalent, and one
  planted bug each) is judged by `python -m refimpl.conformance --backend TINYGRAD:<module>:<Class>` run from elsewhere:
  the planted difference is reported as FAIL with a reproducer, a known failure declared in an xfail file passes the
  run; against its baseline (--baseline TINYGRAD:CLANG) a port shows exactly its own differences, none for the faithful
  and the equivalent one; a backend that does not open or a run that checks nothing exits 2 with the cause; other
  processes open a port by name (spawned workers).
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
from refimpl.fuzz import load_finding
from refimpl.ir import Ops, ProgramError, elementwise
from refimpl.lower import lower_for
from refimpl.testing import eval_op

pytest.importorskip("tinygrad")
from tinygrad.device import Compiled as TinygradCompiled
from tinygrad.runtime.ops_python import PythonAllocator, PythonCompiler, PythonProgram, PythonRenderer

THIRD_PARTY = pathlib.Path(__file__).parent / "third_party"
MYDEV = "TINYGRAD:my_tinygrad_device.ops_mydev:MyDevice"
PLANTED = "TINYGRAD:my_tinygrad_device.ops_mydev:PlantedDevice"
PORT = "TINYGRAD:my_tinygrad_device.ops_mydev:{}Device"
NOCOMPILER = PORT.format("NoCompiler")


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
  """HIP has no stand-in (refimpl.tinygrad.v0_10.standins): without ROCm it does not open, naming what to install."""
  if pathlib.Path("/opt/rocm").exists(): pytest.skip("ROCm is installed here")
  why = Device.open_error("TINYGRAD:HIP")
  assert why is not None and "TINYGRAD:HIP" in why and "needs an AMD GPU and ROCm" in why
  unknown = Device.open_error("TINYGRAD:NOSUCH")
  assert unknown is not None and "CLANG" in unknown and "WEBGPU" in unknown and "<module>:<Class>" in unknown


def test_a_device_whose_compiler_cannot_run_does_not_open_and_says_why(third_party_path):
  """A compiler that runs a clang this machine lacks: the device does not open, naming the error (never "every dtype
  unsupported")."""
  why = Device.open_error(NOCOMPILER)
  assert why is not None and "cannot run a kernel" in why and "FileNotFoundError" in why and "clang-not-installed-here" in why


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
  from refimpl.tinygrad.v0_10.backend import takes_grid
  assert not takes_grid(clang.tg.runtime("k", clang.tg.compiler.compile("void k(int* restrict o) { o[0] = 1; }")))
  assert takes_grid(PythonProgram.__call__)


def test_a_dtype_is_supported_exactly_when_tinygrad_declares_it():
  """tinygrad's is_dtype_supported is the device's declaration: WEBGPU declares 8 dtypes (not half, int64, float64),
  CLANG refuses bfloat16; int8, which WEBGPU declares, stays supported even where its shaders do not compile (that is
  a failure of the device, not "unsupported"); fp8 does not exist in tinygrad 0.10.1."""
  clang = Device["TINYGRAD:CLANG"]
  assert not clang.supports_dtype(dtypes.bfloat16)
  assert "declares it unsupported on CLANG" in clang.unsupported_reasons[dtypes.bfloat16]
  assert clang.supports_dtype(dtypes.float16) and not clang.supports_dtype(dtypes.fp8e4m3)
  why = Device.open_error("TINYGRAD:WEBGPU")
  if why is not None: pytest.skip(f"TINYGRAD:WEBGPU does not open here: {why}")
  dev = Device["TINYGRAD:WEBGPU"]
  for dt in (dtypes.float16, dtypes.int64, dtypes.float64):
    assert not dev.supports_dtype(dt) and "declares it unsupported on WEBGPU" in dev.unsupported_reasons[dt]
  assert dev.supports_dtype(dtypes.int8) and dev.supports_dtype(dtypes.float32)
  assert dev.renderer.global_max == (65535, 65535, 65535)
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


def _run(tmp_path: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(THIRD_PARTY), *filter(None, [os.environ.get("PYTHONPATH")])])}
  return subprocess.run([sys.executable, "-m", "refimpl.conformance", "--quick", *args], capture_output=True, text=True,
                        timeout=1500, cwd=tmp_path, env=env)


@pytest.mark.parametrize("args, cause", [
  (("--backend", "TINYGRAD:tg_ext_x:NoClangDevice"), "No module named 'tg_ext_x'"),
  (("--backend", NOCOMPILER, "--only", "*ADD*"), "FileNotFoundError"),
  (("--backend", MYDEV, "--baseline", "TINYGRAD:tg_ext_x:NoClangDevice"), "--baseline TINYGRAD:tg_ext_x:NoClangDevice"),
  (("--backend", MYDEV, "--only", "NO-SUCH-CASE*"), "no test selected"),
  (("--backend", MYDEV, "--only", "*-bf16"), "tests skipped, e.g."),  # tinygrad declares bfloat16 unsupported on a C device
], ids=["misspelled-module", "no-compiler", "misspelled-baseline", "empty-slice", "all-skipped"])
def test_a_backend_that_does_not_open_or_a_run_that_checks_nothing_exits_2_with_the_cause(tmp_path, args, cause):
  res = _run(tmp_path, *args)
  assert res.returncode == 2, res.stdout[-3000:] + res.stderr[-2000:]
  assert cause in res.stdout + res.stderr


# the op sweeps the baseline test keeps beside every rule and program test: MAX (tinygrad's CLANG fails it: a baseline
# failure), FDIV (not rendered: not tested), ADD and IDIV on every dtype (bf16: declared unsupported); the other ops'
# sweeps and the hypothesis-drawn tests exercise the same comparison on more cases (the suite's longest test otherwise)
BASELINE_SKIP = ["*hypothesis*", *(f"*on_the_sweep*-{op}-*" for op in (
  "SUB", "MUL", "NEG", "MULACC", "RECIP", "SQRT", "EXP2", "LOG2", "SIN", "MOD", "CMPLT", "CMPNE", "WHERE", "AND", "OR", "XOR",
  "SHL", "SHR", "CAST", "BITCAST", "THREEFRY"))]


def test_a_faithful_port_judged_against_its_baseline_differs_in_nothing(tmp_path):
  """MyDevice against tinygrad's CLANG, on every rule and program test of the suite and the op sweeps of BASELINE_SKIP's
  note: every kernel run on both with the same inputs, no difference; what tinygrad's CLANG fails, MyDevice fails the
  same way (as baseline), and refimpl's own export limits are "not tested", not failures. Exit 0."""
  skip = [x for p in BASELINE_SKIP for x in ("--skip", p)]
  res = _run(tmp_path, "--backend", MYDEV, "--baseline", "TINYGRAD:CLANG", "--report", "r/mydev.html", *skip)
  assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
  assert f"{MYDEV}: 0 differences from the baseline TINYGRAD:CLANG" in res.stdout
  doc = json.loads((tmp_path / "r" / "mydev.json").read_text())
  statuses = {s for _, _, s, _ in doc["results"]}
  assert "fail" not in statuses and {"pass", "baseline", "unsupported"} <= statuses
  assert "0 op cells differ from it (FAIL)" in (tmp_path / "r" / "mydev.md").read_text()


XOR_DTYPES = ("bool", "i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64")
# the tests each planted bug fails that tinygrad's CLANG does not (docs/porting.md, section 11); the sweeps find every
# bug whatever the run, the hypothesis examples (a few random ones per case) only when an example shows it: XOR
# rendered as OR differs only on lanes where both operands have a bit set (for bool: both true), which a run's few
# examples may not hold, so those tests may fail with the bug but never without it (MAY_ALSO)
SLICE_FOR_BASELINE = ["*-XOR-*", "*-CMPNE-*", "*threefry*", "*vector*", "*constants_render*", "*-MUL-f32*"]
DIFFERENCES = {
  "Equivalent": set(),
  "Planted": {"test_threefry_matches_the_random123_known_answers"} |
             {f"test_backend_matches_the_spec_on_the_sweep-XOR-{d}" for d in XOR_DTYPES},
  "ShortLiteral": {"test_constants_render_exactly-float32"},
  "Renamed": {"test_vectors_load_compute_shuffle_and_store",
              "test_backend_matches_the_emulator_on_hand_written_programs-vectors"},
}


MAY_ALSO = {"Planted": {f"test_backend_matches_the_spec_on_hypothesis_examples-XOR-{d}" for d in XOR_DTYPES}}


def _failed(stdout: str, device: str) -> set[str]:
  """The failed tests of `device` in a run's short summary, as name-param (the device left out)."""
  out = set()
  for line in stdout.splitlines():
    if not line.startswith("FAILED") or (device + "]" not in line and device + "-" not in line): continue
    name, _, param = line.split("::")[-1].split(" ")[0].rstrip("]").partition("[")
    rest = param.replace(device, "").strip("-")
    out.add(f"{name}-{rest}" if rest else name)
  return out


def test_each_planted_bug_shows_as_exactly_its_differences_from_the_baseline(tmp_path):
  """Ports of tinygrad's CLANG with one bug each, on the slice where the bugs show: against --baseline TINYGRAD:CLANG
  the failing tests are exactly each bug's (the failures the baseline shares pass the run as expected failures);
  the equivalent port (other C, the same results) has none."""
  devices = [PORT.format(k) for k in DIFFERENCES]
  only = [x for p in SLICE_FOR_BASELINE for x in ("--only", p)]
  res = _run(tmp_path, *[x for d in devices for x in ("--backend", d)], "--baseline", "TINYGRAD:CLANG", *only, "-n", "2")
  assert res.returncode == 1, res.stdout[-4000:] + res.stderr[-2000:]
  for kind, expected in DIFFERENCES.items():
    failed = _failed(res.stdout, PORT.format(kind))
    assert expected <= failed <= expected | MAY_ALSO.get(kind, set()), (kind, failed ^ expected)
    assert f"{PORT.format(kind)}: {len(failed)} difference" in res.stdout


def test_a_fuzz_campaign_against_its_baseline_counts_only_the_ports_own_bugs(tmp_path):
  """Rule (python -m refimpl.fuzz --baseline): a failure the baseline device shows on the same case with the same bits
  is counted "as baseline", not as a finding. tinygrad's CLANG fails some generated programs; against it the faithful
  port has no finding, the planted one only findings whose program has the XOR it renders wrongly; exit 1 for those."""
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(THIRD_PARTY), *filter(None, [os.environ.get("PYTHONPATH")])])}
  res = subprocess.run([sys.executable, "-m", "refimpl.fuzz", "--backend", MYDEV, "--backend", PLANTED, "--baseline",
                        "TINYGRAD:CLANG", "--iterations", "60", "--jobs", "2", "--no-reduce", "--seed", "0", "--quiet",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=1500, cwd=tmp_path, env=env)
  assert res.returncode == 1, res.stdout[-3000:] + res.stderr[-2000:]
  table = res.stdout[res.stdout.index("as baseline"):]  # the summary's table: backend, runs, prog/s, unsupported, ...
  row = next(ln.split() for ln in table.splitlines() if ln.split()[:1] == [MYDEV])
  runs, findings, as_baseline = row[1], row[4], row[5]
  assert runs == "60" and findings == "0" and int(as_baseline) > 0, res.stdout[-3000:]
  found = [load_finding(p) for p in tmp_path.glob("*.json")]
  assert found and {f.signature.backend for f in found} == {PLANTED}
  assert all(any(u.op is Ops.XOR for u in f.case.program.uops) for f in found)
