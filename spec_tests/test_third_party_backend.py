"""A backend defined outside refimpl (spec_tests/third_party/faithful_backend: refimpl's CLANG pipeline under another
name) is what porting looks like, so the suite must hold it to the spec without false alarms. Rules:
- every process the suite, the fuzzer or the corpus replay starts (subprocesses, spawned workers) knows every backend
  the parent registered, by `module:Class` or by entry point;
- the suite passes on a correct third-party backend, with zero failures: every test whose result depends on --backend
  (those that take the backend fixture; the others give the same result whatever the backend)."""
import importlib.util
import multiprocessing
import os
import pathlib
import re
import subprocess
import sys

import pytest

from refimpl.device import REGISTRATIONS_ENV, Device

THIRD_PARTY = pathlib.Path(__file__).parent / "third_party"
SPEC = "faithful_backend.device:FaithfulDevice"


def env_with_third_party(**extra: str) -> dict[str, str]:
  """The environment of a process that has faithful_backend installed (on its path, with its .dist-info)."""
  path = os.pathsep.join([str(THIRD_PARTY), *filter(None, [os.environ.get("PYTHONPATH")])])
  return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.fixture
def faithful(monkeypatch):
  """FAITHFUL registered in this process by module:Class (its environment restored afterwards)."""
  monkeypatch.syspath_prepend(str(THIRD_PARTY))
  monkeypatch.delenv(REGISTRATIONS_ENV, raising=False)
  from refimpl.device import load_object
  yield Device.register("FAITHFUL", load_object(SPEC))
  Device._specs.pop("FAITHFUL", None)


def open_in_a_child(name: str, env: dict[str, str]) -> subprocess.CompletedProcess:
  code = "import sys\nfrom refimpl.device import Device\nprint(Device[sys.argv[1]].device)\n"
  return subprocess.run([sys.executable, "-c", code, name], capture_output=True, text=True, timeout=120, env=env)


def _device_of(name: str, queue) -> None:
  from refimpl.device import Device
  try: queue.put(Device[name].device)
  except Exception as e: queue.put(f"{type(e).__name__}: {e}")


def test_a_registered_backend_is_known_to_subprocesses(faithful):
  res = open_in_a_child(faithful, {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
  assert res.returncode == 0 and res.stdout.strip() == "FAITHFUL", res.stderr[-2000:]


def test_a_registered_backend_is_known_to_spawned_workers(faithful):
  ctx = multiprocessing.get_context("spawn")
  queue = ctx.Queue()
  proc = ctx.Process(target=_device_of, args=(faithful, queue))
  proc.start()
  proc.join(120)
  assert queue.get(timeout=5) == "FAITHFUL"


def test_an_entry_point_backend_is_known_to_subprocesses():
  res = open_in_a_child("FAITHFUL_EP", env_with_third_party())
  assert res.returncode == 0 and res.stdout.strip() == "FAITHFUL_EP", res.stderr[-2000:]


def test_a_class_no_other_process_can_import_is_not_passed_down(monkeypatch):
  """A class defined inside a function cannot be imported by a child: it is registered here and left out of the
  environment (a child reports the device unknown instead of importing something else)."""
  monkeypatch.delenv(REGISTRATIONS_ENV, raising=False)
  class LocalDevice: pass
  Device.register("LOCALONLY", LocalDevice)
  try: assert "LOCALONLY" not in os.environ.get(REGISTRATIONS_ENV, "") and "LOCALONLY" in Device._specs
  finally: Device._specs.pop("LOCALONLY", None)


def test_the_suite_passes_on_a_correct_third_party_backend(tmp_path):
  """`pytest spec_tests --backend faithful_backend.device:FaithfulDevice --backend-tests-only` (this file left out: it
  would recurse), run as a porter runs it, with the package importable; zero failures, and its conformance report is
  written. Left out too: the files whose tests pick their own backends (the result does not depend on --backend)."""
  report = tmp_path / "faithful.md"
  args = [sys.executable, "-m", "pytest", str(pathlib.Path(__file__).parent), "--backend", SPEC, "-q", "-p", "no:cacheprovider",
          f"--ignore={__file__}", "--conformance-report", str(report), "--hypothesis-profile", "dev", "--backend-tests-only"]
  # these choose their own backends (a porter's project, PYTHON and CLANG, tinygrad's), whatever --backend says
  own_backends = ("test_packaged_suite.py", "test_parallel_runs.py", "test_tinygrad_backends.py")
  args += [f"--ignore={pathlib.Path(__file__).with_name(n)}" for n in own_backends]
  if importlib.util.find_spec("xdist") is not None: args += ["-n", "2"]  # the longest test of the suite: use both cores
  res = subprocess.run(args, capture_output=True, text=True, timeout=1800, env=env_with_third_party(),
                       cwd=pathlib.Path(__file__).parent.parent)
  summary = res.stdout.strip().splitlines()[-1] if res.stdout.strip() else ""
  assert res.returncode == 0 and " passed" in summary and not re.search(r"\d+ (failed|errors?)\b", summary), \
    res.stdout[-6000:] + res.stderr[-2000:]
  assert "FAITHFUL" in report.read_text()
