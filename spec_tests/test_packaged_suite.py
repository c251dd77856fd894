"""The porting workflow from an installed package: a porter's project outside this checkout, with refimpl installed
as a package (not this checkout), runs the packaged conformance suite on its backend and gets the report. Rules: it
needs nothing but the installed package; a correct backend passes; a known failure declared with --xfail (a pattern,
or a file of patterns) does not fail the run; `pytest --pyargs refimpl.conformance` runs the same suite."""
import fcntl
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from refimpl.testing.differential import alu_cases, bitcast_cases, cast_cases

CHECKOUT = pathlib.Path(__file__).resolve().parents[1]
DEVICE = '''
from refimpl.backends.ops_clang import ClangCompiler, ClangProgram, ClangRenderer
from refimpl.device import Compiled, MallocAllocator

class MyDevice(Compiled):
  """The porter's backend: refimpl's CLANG pipeline under another name."""
  subprocess_safe = True
  def __init__(self, device="MY"):
    super().__init__(device, MallocAllocator, ClangRenderer(device), ClangCompiler(), ClangProgram)
'''


def _install(root: pathlib.Path) -> pathlib.Path:
  """refimpl installed (pip --target, from a copy of this checkout) under root/site; returns that folder. Under
  pytest-xdist the workers of one run share it (the first installs while the others wait on its lock), so one run
  installs once."""
  site, source = root / "site", root / "source"
  if (root / "installed").exists(): return site
  for part in (site, source): shutil.rmtree(part, ignore_errors=True)  # what a worker that failed to install left
  # built from a copy: setuptools builds in the source tree (build/), which parallel test workers would share
  shutil.copytree(CHECKOUT / "refimpl", source / "refimpl", ignore=shutil.ignore_patterns("__pycache__"))
  for part in ("pyproject.toml", "README.md"): shutil.copy(CHECKOUT / part, source / part)
  res = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target",
                        str(site), str(source)], capture_output=True, text=True, timeout=600)
  assert res.returncode == 0, res.stderr[-3000:]
  (root / "installed").write_text("")
  return site


@pytest.fixture(scope="module")
def porter(tmp_path_factory) -> tuple[pathlib.Path, dict[str, str]]:
  """(the porter's project directory, the environment in which refimpl is an installed copy, not this checkout)."""
  root = tmp_path_factory.mktemp("porter")
  run_id = os.environ.get("PYTEST_XDIST_TESTRUNUID")
  if run_id is None: site = _install(root)
  else:
    shared = tmp_path_factory.getbasetemp().parent / f"refimpl-{run_id}" / "packaged-install"
    shared.mkdir(parents=True, exist_ok=True)
    with open(shared.parent / "packaged-install.lock", "w") as lock:
      fcntl.flock(lock, fcntl.LOCK_EX)
      site = _install(shared)
  project = root / "project"
  (project / "my_backend").mkdir(parents=True)
  (project / "my_backend" / "__init__.py").write_text("")
  (project / "my_backend" / "device.py").write_text(textwrap.dedent(DEVICE))
  return project, {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), str(project)])}


def run(porter, *args: str) -> subprocess.CompletedProcess:
  project, env = porter
  return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=1200, cwd=project, env=env)


def test_refimpl_is_the_installed_copy(porter):
  res = run(porter, "-c", "import refimpl, refimpl.conformance; print(refimpl.__file__)")
  assert res.returncode == 0 and "site" in pathlib.Path(res.stdout.strip()).parts, res.stdout + res.stderr
  assert CHECKOUT not in pathlib.Path(res.stdout.strip()).parents


def test_a_correct_backend_passes_the_packaged_suite_and_gets_the_report(porter):
  res = run(porter, "-m", "refimpl.conformance", "--backend", "my_backend.device:MyDevice", "--quick", "--report",
            "reports/my.html")
  assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
  cases = len(alu_cases()) + len(cast_cases()) + len(bitcast_cases())  # the op suite's cases: every op x dtype cell
  assert f"refimpl conformance of MY: {cases} op cases: {cases} pass, 0 FAIL" in res.stdout, res.stdout[-3000:]
  assert "warnings summary" not in res.stdout and "Warning" not in res.stderr, res.stdout[-3000:] + res.stderr[-2000:]
  page = (porter[0] / "reports" / "my.html").read_text()
  assert "<h2 id='b-MY'>MY</h2>" in page and (porter[0] / "reports" / "my.md").exists()


def test_declared_known_failures_do_not_fail_the_run(porter):
  """A planted floor-division backend fails IDIV on signed ints; declared known (a pattern on the command line, or
  a file), the run passes and pytest reports the failures as expected ones."""
  (porter[0] / "known.txt").write_text("# floor division, to be fixed\n*-IDIV-i*\n")
  args = ["--backend", "refimpl.fuzz.planted:FloorDivClang", "--quick", "--only", "*-IDIV-*", "--report", "reports/floor.html"]
  undeclared = run(porter, "-m", "refimpl.conformance", *args)
  assert undeclared.returncode == 1 and "FAIL" in undeclared.stdout
  for declare in (["--xfail", "*-IDIV-i*"], ["--xfail-file", "known.txt"]):
    res = run(porter, "-m", "refimpl.conformance", *args, *declare)
    assert res.returncode == 0 and " xfailed" in res.stdout, res.stdout[-3000:]


def test_pytest_pyargs_runs_the_same_suite(porter):
  res = run(porter, "-m", "pytest", "--pyargs", "refimpl.conformance", "--backend", "my_backend.device:MyDevice", "-q",
            "-p", "no:cacheprovider", "--only", "*-ADD-*", "--hypothesis-profile", "dev")
  assert res.returncode == 0 and " passed" in res.stdout and "refimpl conformance of MY" in res.stdout, res.stdout[-3000:]


def test_a_devices_own_known_failures_are_marked_xfail_with_their_reason(monkeypatch):
  """Rule (refimpl.testing.pytest_plugin): the tests matching a selected device's `known_failures` patterns are expected
  failures with the device's reason; other tests and other devices are untouched."""
  import types

  from refimpl.testing import pytest_plugin as plugin

  class Item:
    def __init__(self, callspec_id: str):
      self.callspec = types.SimpleNamespace(id=callspec_id, params={"backend": callspec_id.split("-")[0]})
      self.name, self.originalname = f"t[{callspec_id}]", "t"
      self.fixturenames, self.markers, self.user_properties = ("backend",), [], []
    def add_marker(self, marker): self.markers.append(marker)

  monkeypatch.setattr(plugin, "EXPECTATIONS", plugin.Expectations())
  monkeypatch.setattr(plugin.Device, "_opened", {**plugin.Device._opened,
                                                  "KNOWN": types.SimpleNamespace(known_failures={"KNOWN-SIN-f32": "why"})})
  config = types.SimpleNamespace(_refimpl_selection=plugin.Selection(["KNOWN"], {}), getoption=lambda name: False)
  items = [Item("KNOWN-SIN-f32"), Item("KNOWN-ADD-f32"), Item("OTHER-SIN-f32")]
  plugin.pytest_collection_modifyitems(config, items)
  assert [[m.kwargs.get("reason") for m in it.markers] for it in items] == [["why"], [], []]
  assert [dict(it.user_properties).get(plugin._BACKEND) for it in items] == ["KNOWN", "KNOWN", "OTHER"]


def test_without_hypothesis_the_runner_names_the_extra_to_install(tmp_path):
  """`python -m refimpl.conformance` where hypothesis does not import exits 2 naming what to install, before pytest
  starts (a collection error would end in "no test selected", which hides the cause)."""
  (tmp_path / "hypothesis.py").write_text("raise ImportError('no module named hypothesis (blocked by the test)')\n")
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
  res = subprocess.run([sys.executable, "-m", "refimpl.conformance", "--backend", "PYTHON"], capture_output=True,
                       text=True, timeout=300, cwd=tmp_path, env=env)
  assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
  assert "needs hypothesis: pip install 'refimpl[conformance]'" in res.stderr
