"""tinygrad 0.14 programs on the reference (refimpl.tinygrad.v0_14.device), run in a Python that has tinygrad 0.14.0
(a second environment: refimpl's own pins 0.10.1). Rules:
- `python -m refimpl.tinygrad run -- script.py` under tinygrad 0.14 runs every kernel on the emulator, strict: a script
  whose kernels are defined runs whole, and computes what tinygrad 0.14's own emulator computes;
- undefined behaviour that reaches a store stops the script naming the kernel, the uop, the lane and the operands; a
  division by zero that a WHERE discards does not;
- examples/mlp.py runs on the reference with no undefined behaviour and computes the losses tinygrad 0.14's CPU device
  computes (the tolerance of the 0.10.1 example test, test_tinygrad_examples.py);
- `run --check CPU` runs the script on tinygrad 0.14's CPU device (refimpl's clang: refimpl.tinygrad.v0_14.toolchain)
  with each kernel checked on the emulator: a sum whose C evaluates in another order than its kernel is reported as a
  disagreement and saved as a reproducer (exit status 1), the same sum on values where the orders agree is not;
  `run --check CL` (pyopencl's OpenCL loader and PoCL) reports a multiply-add exactly when the device fused it;
- the 0.10.1 commands refuse tinygrad 0.14 with exit status 2, naming the lines refimpl serves;
- tinygrad 0.14's own test_tiny passes on the reference; `selftest --tests CHECKOUT` on REFIMPL gives tinygrad's CPU
  (which tests use beside the default device) refimpl's clang, and saves each undefined kernel as a reproducer;
- `--backend TINYGRAD:CPU` under 0.14 (refimpl.tinygrad.v0_14.backend: refimpl's programs exported to 0.14's kernel form,
  rendered, compiled and run by 0.14's CPU device): every CPU corpus kernel exports and renders, the ones run give the
  emulator's results but where tinygrad's C reassociates; a slice of the op suite passes but MAX-f32 (0.14 drops a
  NaN), and catches a planted MAX-as-MIN renderer; vector access and accumulators render right.

The environment: $REFIMPL_TINYGRAD14_PYTHON (`.ci/run` makes .ci/venv14 and sets it; then it must work), else
.venv14/bin/python in the checkout; with neither the tests are skipped, saying how to make one:
  python3.11 -m venv .venv14 && .venv14/bin/pip install tinygrad==0.14.0 -e '.[clang,gpu,conformance]'"""
from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from refimpl.testing.compare import same_value
from refimpl.tinygrad.selftest import fetch_sdist

ROOT = Path(__file__).resolve().parents[1]
MAKE_ONE = "python3.11 -m venv .venv14 && .venv14/bin/pip install tinygrad==0.14.0 -e '.[clang,gpu,conformance]'"
HANG_GUARD = 900  # seconds a subprocess may take before the test stops it as hung: a guard, never a measurement


def _tinygrad14_python() -> str | None:
  """The interpreter with tinygrad 0.14.0 (module docstring); a set variable that does not name one is an error."""
  named = os.environ.get("REFIMPL_TINYGRAD14_PYTHON")
  path = named or str(ROOT / ".venv14" / "bin" / "python")
  if not Path(path).exists():
    if named: raise AssertionError(f"REFIMPL_TINYGRAD14_PYTHON={named} does not exist")
    return None
  probe = subprocess.run([path, "-c", "from importlib import metadata; print(metadata.version('tinygrad'))"],
                         capture_output=True, text=True, timeout=60)
  if probe.stdout.strip() != "0.14.0":
    raise AssertionError(f"{path} has no tinygrad 0.14.0: {probe.stdout.strip() or probe.stderr[-500:]}")
  return path


@pytest.fixture(scope="module")
def python14() -> str:
  path = _tinygrad14_python()
  if path is None: pytest.skip(f"no tinygrad 0.14 environment; make one: {MAKE_ONE}")
  return path


def _run(python: str, tmp_path: Path, script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
  (tmp_path / "script.py").write_text(script)
  base = {k: v for k, v in os.environ.items() if k != "DEV"}  # the script's device is the test's choice
  env = {**base, "PYTHONPATH": str(ROOT), **(env or {})}
  command = [python, *args] if args else [python, "-m", "refimpl.tinygrad", "run", "--", "script.py"]
  return subprocess.run(command, capture_output=True, text=True, timeout=HANG_GUARD, cwd=tmp_path, env=env)


# small kernels of every form: elementwise, a reduction, a matmul with locals, int division, a cast
PROGRAM = """
import numpy as np
from tinygrad import Tensor
rng = np.random.default_rng(0)
a, b = Tensor(rng.uniform(-4, 4, 64).astype(np.float32)), Tensor(rng.uniform(-4, 4, 64).astype(np.float32))
m = Tensor(rng.uniform(-1, 1, (16, 16)).astype(np.float32))
i = Tensor(rng.integers(-100, 100, 64).astype(np.int32))
for t in (a * b + 1, (a * b).sum(), m @ m, m.softmax(axis=1), i // 7, i % 5, a.cast("int32"), a.exp2(), a.sqrt()):
  print(t.dtype.name if hasattr(t.dtype, "name") else t.dtype, t.numpy().tobytes().hex())
"""


def _arrays(stdout: str) -> list[np.ndarray]:
  """The script's printed tensors (numpy dtype name, bytes in hex) as arrays."""
  out = []
  for line in stdout.splitlines():
    dtype, hexbytes = line.split()
    out.append(np.frombuffer(bytes.fromhex(hexbytes), dtype={"float": np.float32, "int": np.int32}[dtype]))
  return out


def test_a_tinygrad_014_program_runs_whole_on_the_reference_and_computes_what_its_emulator_computes(python14, tmp_path):
  ref = _run(python14, tmp_path, PROGRAM)
  assert ref.returncode == 0, ref.stderr[-3000:]
  assert "0 with undefined behaviour, 0 not translatable" in ref.stderr
  emulator = _run(python14, tmp_path, PROGRAM, "script.py", env={"DEV": "PYTHON"})
  assert emulator.returncode == 0, emulator.stderr[-3000:]
  ours, theirs = _arrays(ref.stdout), _arrays(emulator.stdout)
  assert len(ours) == len(theirs) == 9
  for k, (a, b) in enumerate(zip(ours, theirs)):  # the same bits, a NaN for a NaN (the spec does not pin a NaN's bits)
    assert same_value(a, b).all(), (k, a[~same_value(a, b)], b[~same_value(a, b)])


@pytest.mark.parametrize("example", ["mlp", "cnn", "attention", "symbolic_batch"])
def test_the_examples_run_whole_on_the_reference_under_tinygrad_014(python14, tmp_path, example):
  """examples/ serve both lines: every kernel of each runs on the reference with no undefined behaviour."""
  res = _run(python14, tmp_path, (ROOT / "examples" / f"{example}.py").read_text())
  assert res.returncode == 0, res.stderr[-3000:]
  assert "0 with undefined behaviour, 0 not translatable" in res.stderr and " kernels in " in res.stdout


LOSS = re.compile(r"step \d+: loss (\S+)")


def _losses(stdout: str) -> list[float]:
  return [float(x) for x in LOSS.findall(stdout)]


@functools.cache  # once per test process: a probe compiles a kernel
def _device_problem(python: str, device: str) -> str | None:
  """Why tinygrad 0.14's `device` (CPU, CL) cannot run here, with the toolchain's reason (what to install); None when
  it runs."""
  probe = f"from refimpl.tinygrad.v0_14.toolchain import use_device; print(use_device({device!r}))"
  res = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=HANG_GUARD,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
  return None if res.stdout.strip() == "None" else f"{res.stdout}{res.stderr[-500:]}"


def _device_or_skip(python: str, device: str) -> None:
  """Skips when tinygrad 0.14's `device` cannot run here, saying why (_device_problem)."""
  why = _device_problem(python, device)
  if why is not None: pytest.skip(f"tinygrad 0.14's {device} device does not run here: {why}")


def test_mlp_on_the_reference_computes_the_losses_of_tinygrads_cpu(python14, tmp_path):
  """examples/mlp.py (three SGD steps) on REFIMPL, strict, and on tinygrad 0.14's CPU with every kernel checked: the
  same three losses to rtol 1e-4, atol 1e-5 (the 0.10.1 example test's tolerance against tinygrad's CLANG)."""
  _device_or_skip(python14, "CPU")
  script = (ROOT / "examples" / "mlp.py").read_text()
  ref = _run(python14, tmp_path, script)
  assert ref.returncode == 0 and "0 with undefined behaviour, 0 not translatable" in ref.stderr, ref.stderr[-3000:]
  cpu = _run(python14, tmp_path, script, "-m", "refimpl.tinygrad", "run", "--check", "CPU", "--out", "check", "--",
             "script.py")
  assert "0 with undefined behaviour, 0 not translatable" in cpu.stderr, cpu.stderr[-3000:]
  assert cpu.returncode in (0, 1), cpu.stderr[-3000:]  # 1: disagreements of tinygrad's C (test_tinygrad14_import.py)
  got, want = _losses(ref.stdout), _losses(cpu.stdout)
  assert len(got) == len(want) == 3 and np.allclose(got, want, rtol=1e-4, atol=1e-5), (got, want)


# a sum of 256 floats: tinygrad 0.14 unrolls it by 4 (kernel r_64_4: acc + (((v0 + v1) + v2) + v3)) and its C renders
# acc+v0+v1+v2+v3, which C evaluates left to right; with 1 in the first group and 1e8, -1e8 in the second, the kernel's
# order gives 1 + 0 = 1 and C's gives (1 + 1e8) - 1e8 = 0 (1e8 + 1 rounds to 1e8 in float32)
SUM = """
import numpy as np
from tinygrad import Tensor
x = np.{fill}(256, np.float32)
x[0], x[4], x[5] = 1, 1e8, -1e8
print("sum", Tensor(x).sum().numpy())
"""


def test_run_check_cpu_without_a_clang_says_what_to_install(python14, tmp_path):
  """A CC that does not exist (the user's choice, which refimpl keeps) stands for a machine without clang: `run --check
  CPU` exits 2 before running the script, naming the failure and what to install."""
  res = _run(python14, tmp_path, "print('ran')", "-m", "refimpl.tinygrad", "run", "--check", "CPU", "--", "script.py",
             env={"CC": str(tmp_path / "no-such-clang")})
  assert res.returncode == 2 and "ran" not in res.stdout, res.stderr[-2000:]
  assert "cannot use tinygrad's CPU" in res.stderr and "pip install ziglang" in res.stderr, res.stderr[-2000:]


def test_run_check_cpu_reports_tinygrads_c_departing_from_its_kernel(python14, tmp_path):
  _device_or_skip(python14, "CPU")
  check = [python14, "-m", "refimpl.tinygrad", "run", "--check", "CPU", "--out", "check", "--", "script.py"]
  res = _run(python14, tmp_path, SUM.format(fill="zeros"), *check[1:])
  assert res.returncode == 1 and "sum 0.0" in res.stdout, res.stderr[-3000:]
  assert "1 disagreements, 0 with undefined behaviour" in res.stderr, res.stderr[-3000:]
  saved = sorted((tmp_path / "check" / "disagreements").glob("*.json"))
  assert len(saved) == 1, saved
  case = json.loads(saved[0].read_text())
  assert case["found"]["device"] == "CPU" and case["found"]["source"] == "tinygrad 0.14.0", case["found"]
  replayed = subprocess.run([python14, "-m", "refimpl.fuzz", "replay", str(saved[0])], capture_output=True, text=True,
                            timeout=HANG_GUARD, env={**os.environ, "PYTHONPATH": str(ROOT)})
  assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]  # defined: the emulator reruns it
  shutil.rmtree(tmp_path / "check")
  res = _run(python14, tmp_path, SUM.format(fill="ones").replace("1e8, -1e8", "1, 1"), *check[1:])
  assert res.returncode == 0 and "sum 256.0" in res.stdout, res.stderr[-3000:]
  assert "0 disagreements, 0 with undefined behaviour, 0 not translatable" in res.stderr, res.stderr[-3000:]
  assert not (tmp_path / "check" / "disagreements").exists()


# a * b + c in one kernel, with a = b = 1 + 2^-12 and c = -(1 + 2^-11): the kernel rounds a * b to 1 + 2^-11 (the 2^-24
# it drops is a tie, to even) and gives 0; a fused multiply-add (OpenCL C's FP_CONTRACT, on by default) gives 2^-24
FMA = """
import numpy as np
from tinygrad import Tensor
a = np.float32(1 + 2**-12)
x, y, z = (Tensor(np.array([v], np.float32)) for v in (a, a, -(1 + 2**-11)))
print("fma", (x * y + z).numpy()[0])
"""


def test_run_check_cl_reports_a_contracted_multiply_add_exactly_when_the_device_contracts(python14, tmp_path):
  """0.14's CL device (pyopencl's PoCL here): whatever it computes, the check says a disagreement exactly when it is
  not the kernel's 0 (and then it is the fused 2^-24), saved as a reproducer naming CL."""
  _device_or_skip(python14, "CL")
  res = _run(python14, tmp_path, FMA, "-m", "refimpl.tinygrad", "run", "--check", "CL", "--out", "check", "--", "script.py")
  got = np.float32(res.stdout.split("fma ")[1].split()[0])  # float32's shortest decimal: read back exactly
  assert got in (np.float32(0), np.float32(2.0**-24)), res.stdout
  contracted = got != 0.0
  assert res.returncode == int(contracted), res.stderr[-3000:]
  assert f"{int(contracted)} disagreements, 0 with undefined behaviour, 0 not translatable" in res.stderr, res.stderr[-3000:]
  saved = sorted((tmp_path / "check" / "disagreements").glob("*.json"))
  assert len(saved) == int(contracted) and all(json.loads(p.read_text())["found"]["device"] == "CL" for p in saved)


def test_undefined_behaviour_stops_the_script_naming_kernel_uop_and_lane(python14, tmp_path):
  discarded = "from tinygrad import Tensor\nt = Tensor([2, 0, -3], dtype='int32')\nprint((t > 0).where(7 // t, t).numpy())\n"
  res = _run(python14, tmp_path, discarded)
  assert res.returncode == 0 and "[ 3  0 -3]" in res.stdout, res.stderr[-3000:]
  res = _run(python14, tmp_path, discarded + "print((Tensor([7, 7, 7], dtype='int32') // t).numpy())\n")
  assert res.returncode != 0
  assert "KernelUndefinedBehavior: tinygrad kernel" in res.stderr and "division by zero; operands (7, 0)" in res.stderr


def test_the_0_10_1_commands_refuse_tinygrad_014(python14, tmp_path):
  res = _run(python14, tmp_path, "", "-m", "refimpl.tinygrad", "report", "--classes-only")
  assert res.returncode == 2 and "made for tinygrad 0.10.1, but tinygrad 0.14.0 is installed" in res.stderr


def test_tinygrads_own_tiny_tests_pass_on_the_reference(python14, tmp_path):
  """tinygrad 0.14's test_tiny (its sdist's one test file) on the 0.14 REFIMPL device (pytest_device.py): every test
  passes; where tinygrad's CPU device (which stages some constants) has no clang, not even refimpl's (toolchain), the
  tests that need it fail naming clang, and only they."""
  try: root = fetch_sdist(version="0.14.0")
  except RuntimeError as e: pytest.skip(f"tinygrad 0.14's sdist cannot be fetched here: {e}")
  junit = tmp_path / "junit.xml"
  env = {k: v for k, v in os.environ.items() if k != "DEV"}
  res = subprocess.run([python14, "-m", "pytest", "-q", "-p", "refimpl.tinygrad.v0_14.pytest_device", "test/test_tiny.py",
                        f"--junitxml={junit}"], capture_output=True, text=True, timeout=HANG_GUARD, cwd=root,
                       env={**env, "PYTHONPATH": str(ROOT)})
  assert junit.exists(), f"pytest did not run in {python14} (is pytest installed there?): {res.stderr[-2000:]}"
  cases = ET.parse(junit).getroot().iter("testcase")
  failed = {c.get("name"): (c.find("failure") if c.find("failure") is not None else c.find("error")) for c in cases}
  failed = {name: f.get("message", "") for name, f in failed.items() if f is not None}
  passed = sum(1 for c in ET.parse(junit).getroot().iter("testcase") if len(c) == 0)  # no failure, error or skip inside
  if _device_problem(python14, "CPU") is None: assert passed >= 19 and not failed, (passed, failed)
  assert passed >= 17, res.stdout[-2000:]
  for name, why in failed.items():
    assert shutil.which("clang") is None and "No such file or directory: 'clang'" in why, (name, why)


CHECKOUT_TESTS = """
from tinygrad import Tensor

def test_cpu_beside_the_default_device():
  assert (Tensor([1, 2, 3], device="CPU") + 1).tolist() == [2, 3, 4]

def test_divides_by_zero():
  print((Tensor([7, 7], dtype="int32") // Tensor([1, 0], dtype="int32")).numpy())
"""


def test_selftest_on_a_014_checkout_gives_tinygrads_cpu_its_toolchain_and_saves_each_undefined_kernel(python14, tmp_path):
  """`selftest --tests CHECKOUT` under tinygrad 0.14 on REFIMPL: a test that uses tinygrad's CPU beside the default
  device compiles there with refimpl's clang, as in the CPU run (tinygrad's disk cache off, so no earlier run's kernel
  can stand in for the compile); where no clang exists at all it fails naming clang. An int division by zero (the spec:
  CDIV by 0 is undefined) fails as undefined behaviour and its kernel is saved as a reproducer the page links."""
  checkout = tmp_path / "tinygrad"
  (checkout / "test").mkdir(parents=True)
  (checkout / "test" / "test_mini.py").write_text(CHECKOUT_TESTS)
  (checkout / "pyproject.toml").write_text('[project]\nname = "tinygrad"\nversion = "0.14.0"\n')
  env = {k: v for k, v in os.environ.items() if k != "DEV"}
  env.update(PYTHONPATH=str(ROOT), CACHELEVEL="0", CACHEDB=str(tmp_path / "cache.db"))
  res = subprocess.run([python14, "-m", "refimpl.tinygrad", "selftest", "--tests", str(checkout), "--files", "test_mini.py",
                        "--devices", "REFIMPL", "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, timeout=HANG_GUARD, cwd=tmp_path, env=env)
  assert res.returncode == 0, res.stderr[-3000:]
  md = (tmp_path / "out" / "tinygrad-0.14-selftest.md").read_text()
  assert "test_divides_by_zero | undefined behaviour" in md and str(tmp_path) not in md, md  # no machine path
  if _device_problem(python14, "CPU") is None:
    assert "test_mini.py on REFIMPL: 1 passed, 1 failed, 0 skipped" in res.stderr, res.stderr[-3000:]
  else:
    assert "test_cpu_beside_the_default_device" in md and "clang" in md, md
  saved = sorted((tmp_path / "out" / "tinygrad-selftest-undefined").glob("*.json"))
  assert len(saved) == 1, saved
  html_page = (tmp_path / "out" / "tinygrad-0.14-selftest.html").read_text()
  assert f"tinygrad-selftest-undefined/{saved[0].name}" in html_page


def test_selftests_defaults_under_014_name_its_devices_and_files_that_its_sources_hold(python14):
  """Under tinygrad 0.14, `selftest` without --devices runs REFIMPL beside 0.14's CPU (CLANG's new name) and PYTHON, each
  of which tinygrad 0.14 knows; without --files it runs test files that exist: test_tiny.py from the sdist, and from a
  checkout test_tiny.py and the repository's backend/ emulator tests (0.14's layout)."""
  try: root = fetch_sdist(version="0.14.0")
  except RuntimeError as e: pytest.skip(f"tinygrad 0.14's sdist cannot be fetched here: {e}")
  probe = ("import json; from refimpl.tinygrad.selftest import default_devices, default_files, line; "
           "from tinygrad.device import ALL_DEVICES; v = line(); "
           "print(json.dumps([v, default_devices(v), default_files(v, False), default_files(v, True), ALL_DEVICES]))")
  res = subprocess.run([python14, "-c", probe], capture_output=True, text=True, timeout=HANG_GUARD,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
  version, devices, sdist_files, checkout_files, known = json.loads(res.stdout)
  assert version == "0.14.0" and devices[0] == "REFIMPL" and "CLANG" not in devices
  assert all(d in known or d == "PYTHON" for d in devices[1:]), (devices, known)
  assert sdist_files and all((root / "test" / f).is_file() for f in sdist_files), sdist_files
  assert checkout_files[0] == "test_tiny.py" and all(f.startswith("backend/") for f in checkout_files[1:]), checkout_files


CAPTURED = """
import numpy as np
from tinygrad import Tensor
small = Tensor(np.arange(16, dtype=np.float32)) * 3 + 1
large = Tensor(np.arange(4096, dtype=np.float32)).exp2()
print(small.numpy().tobytes().hex(), large.numpy().sum())
"""


def test_capture_saves_each_kernel_as_a_case_that_replays_and_skips_larger_buffers_by_name(python14, tmp_path):
  """`capture --max-elements N` under 0.14: a kernel whose largest buffer has more than N elements is skipped and
  named; every saved case runs on refimpl's emulator to the outputs tinygrad 0.14's PYTHON device computed (compare_run:
  the spec's tolerance per op) and replays with `python -m refimpl.fuzz replay`."""
  from refimpl.fuzz.corpus import load_finding
  from refimpl.tinygrad.cases import tinygrad_outputs
  from refimpl.tinygrad.program import compare_run
  res = _run(python14, tmp_path, CAPTURED, "-m", "refimpl.tinygrad", "capture", "--device", "PYTHON", "--out", "cases",
             "--max-elements", "1000", "--", "script.py")
  assert res.returncode == 0, res.stderr[-3000:]
  skipped = [line for line in res.stderr.splitlines() if line.startswith("  skipped ")]
  assert skipped and all("(more than --max-elements 1000)" in line and "4096 elements" in line for line in skipped), res.stderr
  saved = sorted((tmp_path / "cases").glob("*.json"))
  saved = [p for p in saved if p.name != "untranslated.json"]
  assert saved, res.stderr
  for path in saved:
    assert max(len(b["bits"]) for b in json.loads(path.read_text())["inputs"]) <= 1000
    f = load_finding(path)
    assert compare_run(f.case.program, f.case.inputs, tinygrad_outputs(f), f.case.vals) is None, path.name
  replayed = _run(python14, tmp_path, "", "-m", "refimpl.fuzz", "replay", *map(str, saved))
  assert replayed.returncode == 0, replayed.stdout[-2000:] + replayed.stderr[-2000:]


PORTER = '''
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.runtime.ops_cpu import CPUDevice
from tinygrad.uop.ops import Ops


class MinClangRenderer(ClangRenderer):
  code_for_op = {**ClangRenderer.code_for_op, Ops.MAX: lambda a, b, dtype: f"(({a}<{b})?{a}:{b})"}  # a MIN


class FaithfulDevice(CPUDevice):
  """tinygrad 0.14's CPU device as a porter's class, unchanged."""


class MaxIsMinDevice(CPUDevice):
  """tinygrad 0.14's CPU device whose C renderer renders MAX as a MIN."""
  def __init__(self, device: str = ""):
    super().__init__(device)
    self.renderers = [MinClangRenderer]


class NotADevice:
  pass
'''
MAXIMUM = """
import numpy as np
from tinygrad import Tensor
a = Tensor(np.arange(-8, 8, dtype=np.float32))
print((a.maximum(Tensor(np.zeros(16, dtype=np.float32))) * 2).numpy())
"""


@pytest.mark.parametrize("device, status, says", [
  ("porter_dev:FaithfulDevice", 0, "0 disagreements, 0 with undefined behaviour"),
  ("porter_dev:MaxIsMinDevice", 1, "1 disagreements"),
])
def test_run_check_judges_a_porters_014_device_named_module_class(python14, tmp_path, device, status, says):
  """`run --check module:Class` under 0.14 registers a porter's device class (refimpl.tinygrad.v0_14.porter) and checks
  every kernel it runs against the emulator: MAX is the larger operand (the spec's MAX), so a renderer rendering a MIN
  is a disagreement saved as a reproducer, and an unchanged CPU device has none."""
  _device_or_skip(python14, "CPU")
  (tmp_path / "porter_dev.py").write_text(PORTER)
  res = _run(python14, tmp_path, MAXIMUM, "-m", "refimpl.tinygrad", "run", "--check", device, "--out", "found", "--",
             "script.py", env={"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
  assert res.returncode == status and says in res.stderr, res.stdout[-2000:] + res.stderr[-3000:]
  saved = sorted((tmp_path / "found" / "disagreements").glob("*.json"))
  assert len(saved) == (1 if status == 1 else 0), saved


NOT_A_DEVICE = {"porter_dev:NoSuchDevice": "porter_dev:NoSuchDevice: module porter_dev has no NoSuchDevice",
                "porter_dev:NotADevice": "NotADevice is not a subclass of tinygrad's Compiled",
                "porter_devv:FaithfulDevice": "module porter_devv does not import",
                "my_pkg:CPUDevice": "its name CPU is tinygrad's own device CPU; rename the class"}


def test_a_name_that_is_no_porters_014_device_is_refused_saying_what_is_wrong(python14, tmp_path):
  """use_device (what `run --check` and `capture --device` call) refuses a module:Class that does not import, names
  nothing, is not a subclass of tinygrad's Compiled, or takes a tinygrad device's name, saying which: `run --check`
  then exits 2 before running anything, never a run that checks nothing."""
  (tmp_path / "porter_dev.py").write_text(PORTER)
  (tmp_path / "my_pkg.py").write_text("from tinygrad.runtime import ops_cpu\nclass CPUDevice(ops_cpu.CPUDevice): pass\n")
  probe = ("from refimpl.tinygrad.v0_14.toolchain import use_device\n"
           f"for name in {list(NOT_A_DEVICE)!r}: print(name, '=>', use_device(name))\n")
  res = _run(python14, tmp_path, probe, "script.py", env={"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
  assert res.returncode == 0, res.stderr[-3000:]
  said = dict(line.split(" => ", 1) for line in res.stdout.splitlines())
  for name, why in NOT_A_DEVICE.items(): assert why in said[name], (name, said[name])
  res = _run(python14, tmp_path, MAXIMUM, "-m", "refimpl.tinygrad", "run", "--check", "porter_dev:NotADevice", "--",
             "script.py", env={"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
  assert res.returncode == 2 and NOT_A_DEVICE["porter_dev:NotADevice"] in res.stderr, res.stderr[-2000:]


# ***** TINYGRAD:<NAME> on tinygrad 0.14: refimpl's suite on tinygrad 0.14's devices (refimpl/tinygrad/v0_14/backend.py) *****

EXPORT_CORPUS = '''
import json
import sys
from pathlib import Path

from refimpl.emulator.machine import emulate
from refimpl.fuzz.corpus import load_finding
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value
from refimpl.tinygrad.v0_14.exporter import to_record
from refimpl.tinygrad.v0_14.importer import from_record
from refimpl.tinygrad.v0_14.live import record_of
from refimpl.tinygrad.v0_14.record import dumps, from_json
from refimpl.tinygrad.v0_14.toolchain import prepare_cpu
from refimpl.tinygrad.v0_14.uops import uops_of

assert prepare_cpu() is None
from tinygrad.device import Device

corpus, run = Path(sys.argv[1]), sys.argv[2].split(",")
renderer = Device["CPU"].renderer
out = {"kernels": 0, "records": 0, "rendered": 0, "ran": {}}
for path in sorted(corpus.glob("*.json")):
  f = load_finding(path)
  record = from_json(f.found["record"])
  out["kernels"] += 1
  out["records"] += dumps(record_of(uops_of(record), record.global_size, record.local_size)) == dumps(record)
  program = from_record(record)
  renderer.render(uops_of(to_record(program), renderer))
  out["rendered"] += 1
  if path.stem in run:
    want = emulate(program, [a.copy() for a in f.case.inputs], vals=f.case.vals, strict=False).buffers
    got = Kernel(program, "TINYGRAD:CPU")(*[a.copy() for a in f.case.inputs], vals=f.case.vals)
    out["ran"][path.stem] = all(bool(same_value(g, w).all()) for g, w in zip(got, want))
print(json.dumps(out))
'''
# run on TINYGRAD:CPU: a variable's kernel, an accumulator's, integer division in vectors, and r_64_4, whose C sums
# in another order than its kernel (tinygrad's C renderer strips the parens of a nested ADD: test_tinygrad14_import.py)
EXPORT_RUN = {"E__n_4_2": True, "r_16_4_3": True, "E_16_4_31": True, "r_64_4": False}


def test_every_cpu_corpus_kernel_exports_renders_and_runs_on_tinygrad_014s_cpu(python14, tmp_path):
  """Every kernel of corpus/tinygrad-0.14.0/CPU: its record built as tinygrad 0.14 UOps (v0_14/uops.py) reads back as
  the same record; its program exported (v0_14/exporter.py) renders with 0.14's ClangRenderer; four of them compile
  and run on TINYGRAD:CPU and give what the emulator gives, except r_64_4, where tinygrad's C reassociates a sum
  (a real failure of tinygrad's renderer, found by comparing with the spec)."""
  _device_or_skip(python14, "CPU")
  res = _run(python14, tmp_path, EXPORT_CORPUS, "script.py", str(ROOT / "corpus" / "tinygrad-0.14.0" / "CPU"),
             ",".join(EXPORT_RUN))
  assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
  out = json.loads(res.stdout.strip().splitlines()[-1])
  assert out["kernels"] == 101 and out["records"] == out["rendered"] == out["kernels"], out
  assert out["ran"] == EXPORT_RUN, out


PLANTED = '''
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.runtime.ops_cpu import CPUDevice
from tinygrad.uop.ops import Ops


class MinClangRenderer(ClangRenderer):
  code_for_op = {**ClangRenderer.code_for_op, Ops.MAX: lambda a, b, dtype: f"(({a}<{b})?{a}:{b})"}  # a MIN


class MaxIsMinDevice(CPUDevice):
  """tinygrad 0.14's CPU device whose C renderer renders MAX as a MIN."""
  def __init__(self, device: str = ""):
    super().__init__(device)
    self.renderers = [MinClangRenderer]
'''
SUITE_SLICE = ("ADD-i32", "IDIV-i32", "MAX-i32", "CAST-f32-to-i32", "MAX-f32")
SUMMARY = re.compile(r"refimpl conformance of (\S+): (\d+) op cases: (\d+) pass, (\d+) FAIL")


def test_the_op_suite_runs_on_tinygrad_014s_cpu_and_catches_a_planted_bug(python14, tmp_path):
  """`python -m refimpl.conformance --backend TINYGRAD:CPU` under tinygrad 0.14 (a slice of the op suite, the sweeps):
  ADD, IDIV, MAX on int32 and a float -> int CAST pass on tinygrad 0.14's CPU device; MAX on float32 fails, as on
  0.10.1's CLANG: 0.14 renders MAX as (a<b)?b:a, which drops a NaN in b (a real failure of tinygrad, the spec's MAX
  propagates NaN). A porter's device whose renderer renders MAX as a MIN (TINYGRAD:module:Class) fails MAX on both
  dtypes and passes the rest."""
  _device_or_skip(python14, "CPU")
  (tmp_path / "planted_dev.py").write_text(PLANTED)
  only = [a for case in SUITE_SLICE for a in ("--only", f"*sweep*-{case}]")]
  res = _run(python14, tmp_path, "", "-m", "refimpl.conformance", "--backend", "TINYGRAD:CPU", "--backend",
             "TINYGRAD:planted_dev:MaxIsMinDevice", "--quick", *only, "--report", str(tmp_path / "report.html"),
             env={"PYTHONPATH": f"{ROOT}{os.pathsep}{tmp_path}"})
  found = {m[0]: tuple(map(int, m[1:])) for m in SUMMARY.findall(res.stdout + res.stderr)}
  assert found == {"TINYGRAD:CPU": (5, 4, 1), "TINYGRAD:planted_dev:MaxIsMinDevice": (5, 3, 2)}, res.stdout[-3000:]
  failed = set(re.findall(r"FAILED \S+\[(\S+)\]", res.stdout))
  assert failed == {"TINYGRAD:CPU-MAX-f32", "TINYGRAD:planted_dev:MaxIsMinDevice-MAX-f32",
                    "TINYGRAD:planted_dev:MaxIsMinDevice-MAX-i32"}, res.stdout[-3000:]
  assert res.returncode == 1


VECTORS = '''
import json

import numpy as np

from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value


def vector_program(dtype, offset):
  """out[4g+k] = -(x[4g+offset+k] * 3) for k < 4 through vec4 LOADs, ALU and STOREs; a bool's is a NOT."""
  b = ProgramBuilder(f"vec_{dtype.name.replace(' ', '_')}_{offset}")
  out, x = b.global_buf(dtype, 16), b.global_buf(dtype, 20)
  g = b.gidx(0, 4)
  base = b.alu(Ops.MUL, g, b.const(4, dtypes.int32))
  v = b.load(x, b.alu(Ops.ADD, base, b.const(offset, dtypes.int32)), count=4)
  if dtype == dtypes.bool: r = b.alu(Ops.XOR, v, b.vectorize(*[b.const(True, dtypes.bool)] * 4))
  else: r = b.alu(Ops.NEG, b.alu(Ops.MUL, v, b.vectorize(*[b.const(3, dtype)] * 4)))
  b.store(out, base, r)
  return b.build()


def assign_read_after_its_loop():
  """out[0] = the sum of x[0..8) through an ASSIGN the program reads after the loop."""
  b = ProgramBuilder("assign_after")
  out, x = b.global_buf(dtypes.int32, 1), b.global_buf(dtypes.int32, 8)
  zero = b.const(0, dtypes.int32)
  acc = b.acc(zero)
  with b.loop(8) as r: last = b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, r)))
  b.store(out, zero, last)
  return b.build()


rng = np.random.default_rng(0)
cases = [(vector_program(dt, off), dt) for dt, off in ((dtypes.float32, 0), (dtypes.float32, 1), (dtypes.bool, 0))]
cases.append((assign_read_after_its_loop(), dtypes.int32))
out = {}
for program, dt in cases:
  nbuf = [b for b in sorted(program.buffers)]
  arrays = []
  for k in nbuf:
    ptr = program.buffers[k]
    a = rng.integers(-50, 50, ptr.size)
    arrays.append((a > 0) if dt == dtypes.bool else a.astype(np.float32 if dt == dtypes.float32 else np.int32))
  want = emulate(program, [a.copy() for a in arrays]).buffers
  got = Kernel(program, "TINYGRAD:CPU")(*[a.copy() for a in arrays])
  out[program.name] = all(bool(same_value(g, w).all()) for g, w in zip(got, want))
print(json.dumps(out))
'''


def test_vector_access_and_accumulators_export_to_what_tinygrad_014_renders_right(python14, tmp_path):
  """Found by the fuzzer on TINYGRAD:CPU, each once an exporter bug: vec4 LOADs and STOREs of float at an aligned
  offset (0.14's own coalesced form, a SHRINK) and an unaligned one, and of bool (n scalar accesses: 0.14's vector types
  are aligned), vector ALU (devectorized: 0.14's C renders an INDEX of a STACK of constants as a pointer offset, and
  a bool vector as a bitmask), and an ASSIGN read after its loop (it reads the register): all give the emulator's
  results on tinygrad 0.14's CPU."""
  _device_or_skip(python14, "CPU")
  res = _run(python14, tmp_path, VECTORS, "script.py")
  assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
  out = json.loads(res.stdout.strip().splitlines()[-1])
  assert out == {name: True for name in out} and len(out) == 4, out


def test_the_op_suite_runs_on_tinygrad_014s_cl(python14, tmp_path):
  """`--backend TINYGRAD:CL` (pyopencl's PoCL): a grid device (SPECIALs, not loops). ADD-i32 and EXP2-f32 (CL's own
  exp2) pass, MAX-f32 fails as on CPU (the NaN), and FDIV-f32 is not tested: OpenCL C's renderer has no FDIV and 0.14
  divides as x * RECIPROCAL(y) before its kernels, so refimpl's FDIV has no 0.14 form there (an ExportError)."""
  _device_or_skip(python14, "CL")
  only = [a for case in ("ADD-i32", "EXP2-f32", "MAX-f32", "FDIV-f32") for a in ("--only", f"*sweep*-{case}]")]
  res = _run(python14, tmp_path, "", "-m", "refimpl.conformance", "--backend", "TINYGRAD:CL", "--quick", *only,
             "--report", str(tmp_path / "report.html"))
  assert "refimpl conformance of TINYGRAD:CL: 4 op cases: 2 pass, 1 FAIL, 0 n/a, 0 relaxed, 1 not tested" in res.stdout, \
    res.stdout[-3000:] + res.stderr[-2000:]
  assert set(re.findall(r"FAILED \S+\[(\S+)\]", res.stdout)) == {"TINYGRAD:CL-MAX-f32"}, res.stdout[-3000:]
