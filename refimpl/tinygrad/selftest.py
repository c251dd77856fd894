"""tinygrad's own tests on the reference: `python -m refimpl.tinygrad selftest`, a compatibility table.

    python -m refimpl.tinygrad selftest [--files test_tiny.py,...] [--devices REFIMPL,CLANG,PYTHON] [--out DIR]
                                        [--tests CHECKOUT]

1. fetches tinygrad 0.10.1's source distribution into a cache (CACHE, or tinygrad-0.10.1 under refimpl's cache root
   (refimpl.helpers.cache_dir: $REFIMPL_CACHE_DIR, else $XDG_CACHE_HOME/refimpl, else ~/.cache/refimpl): `pip download
   --no-deps --no-binary :all: tinygrad==0.10.1`, unpacked once; never copied into the repository);
2. runs each chosen test file of its test/ folder on each device, one pytest process per (file, device), with this
   module as a pytest plugin that makes the device tinygrad's default (REFIMPL: refimpl's reference device, installed;
   CLANG: tinygrad's, with refimpl's toolchain; PYTHON: tinygrad's emulator), and reads the outcome of every test from
   pytest's JUnit XML;
3. writes tinygrad-selftest.md and tinygrad-selftest.html to DIR: per file, passed / failed / skipped and the wall time
   per device, then every test that fails on REFIMPL while every other device passes it, with its class (undefined
   behaviour: a finding against the test, with the message that names the kernel, uop and lane; not translatable; an
   error of refimpl's device; the environment: a missing module such as torch, no network, a file that does not
   collect; anything else) and the first line of its error. A failure of the environment is shown apart (amber, not
   red): it says nothing about the device. The runs are also saved as tinygrad-selftest.json, from which
   `rebuild_pages(DIR)` makes the pages again; each page names its commit, date, toolchains and command and links the
   undefined-behaviour reproducers it mentions.
FILES are the test files that need neither torch nor tinygrad's `extra/` (which the sdist lacks); under tinygrad 0.14
the defaults are its own (default_files, default_devices: CPU for CLANG).

`--tests CHECKOUT` runs the tests of a tinygrad checkout the user has (its test/ folder, any file under it:
`--files backend/test_dtype_alu.py` in 0.14's layout) instead of the sdist's: tinygrad 0.14's sdist ships only
test_tiny.py, its emulator test set lives in its repository. The checkout must be of the installed line (its setup.py
`version=`; `checkout_root` refuses another, since its tests run in its folder and import its tinygrad package).
"""
from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

from refimpl import helpers

VERSION = "0.10.1"  # the line whose tests run by default; under tinygrad 0.14 its own (line())
FILES = ("test_tiny.py", "test_uops.py", "test_dtype_alu.py", "test_const_folding.py", "test_arange.py", "test_setitem.py",
         "test_assign.py", "test_symbolic_ops.py", "test_tensor_variable.py", "test_masked_st.py", "test_uop_graph.py")
DEVICES = ("REFIMPL", "CLANG", "PYTHON")
# tinygrad 0.14: its sdist ships only test_tiny.py; its repository's emulator test set (backend/) for --tests CHECKOUT
FILES_014 = ("test_tiny.py",)
CHECKOUT_FILES_014 = ("test_tiny.py", "backend/test_uops.py", "backend/test_dtype_alu.py", "backend/test_const_folding.py",
                      "backend/test_tensor_variable.py", "backend/test_arange.py", "backend/test_setitem.py")
DEVICES_014 = ("REFIMPL", "CPU", "PYTHON")  # 0.14 renamed CLANG to CPU
DEVICE_ENV = "REFIMPL_SELFTEST_DEVICE"  # the device the plugin makes tinygrad's default in a test process
SAVE_ENV = "REFIMPL_SELFTEST_SAVE"  # where the REFIMPL device saves a reproducer of each kernel with undefined behaviour


def line() -> str:
  """The tinygrad line whose tests run: the installed one where refimpl serves it (refimpl.tinygrad.lines), else 0.10.1."""
  from refimpl.tinygrad.lines import SUPPORTED, installed
  have = installed()
  return have if have in SUPPORTED else VERSION


def default_files(version: str, checkout: bool) -> tuple[str, ...]:
  """The test files run when --files is not given: 0.10.1's FILES; under 0.14 test_tiny.py from its sdist, from a
  checkout (`checkout`) its repository's emulator test set."""
  if version == VERSION: return FILES
  return CHECKOUT_FILES_014 if checkout else FILES_014


def default_devices(version: str) -> tuple[str, ...]:
  """The devices run when --devices is not given: REFIMPL beside the line's C device (0.10.1 CLANG, 0.14 CPU) and
  tinygrad's PYTHON emulator."""
  return DEVICES if version == VERSION else DEVICES_014


def page_name(version: str) -> str:
  """The table's file name without suffix: tinygrad-selftest (0.10.1), tinygrad-0.14-selftest (0.14)."""
  return "tinygrad-selftest" if version == VERSION else f"tinygrad-{version.rsplit('.', 1)[0]}-selftest"


def cache_dir(version: str = VERSION) -> Path:
  """Where the sdist is unpacked: tinygrad-<version> under refimpl's cache root (refimpl.helpers.cache_dir)."""
  return helpers.cache_dir() / f"tinygrad-{version}"


def fetch_sdist(cache: Path | None = None, version: str = VERSION) -> Path:
  """The unpacked sdist's root (holding test/) of tinygrad `version`, downloaded with pip and unpacked the first time."""
  cache = cache or cache_dir(version)
  root = cache / f"tinygrad-{version}"
  if (root / "test").is_dir(): return root
  cache.mkdir(parents=True, exist_ok=True)
  cmd = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:", f"tinygrad=={version}",
         "-d", str(cache)]
  res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
  archives = sorted(cache.glob(f"tinygrad-{version}.tar.gz"))
  if res.returncode != 0 or not archives:
    raise RuntimeError(f"could not download tinygrad {version}'s source distribution ({' '.join(cmd)}): {res.stderr.strip()}")
  with tarfile.open(archives[0]) as tar:
    if hasattr(tarfile, "data_filter"): tar.extractall(cache, filter="data")
    else: tar.extractall(cache)  # Python < 3.10.12 has no extraction filters; the archive is PyPI's
  return root


class CheckoutError(ValueError):
  """A --tests folder that is not a tinygrad checkout of the installed line: the message says what is wrong."""


SETUP_VERSION = re.compile(r"""version\s*=\s*['"]([^'"]+)['"]""")


def checkout_root(folder: Path, version: str, files: list[str]) -> Path:
  """`folder` when it is a tinygrad checkout of `version` (a test/ folder holding `files`, and setup.py or
  pyproject.toml naming that version), else CheckoutError saying what is wrong."""
  folder = folder.resolve()
  if not (folder / "test").is_dir(): raise CheckoutError(f"{folder} has no test/ folder: give the root of a tinygrad checkout")
  setup = next((folder / n for n in ("setup.py", "pyproject.toml") if (folder / n).is_file()), None)
  found = SETUP_VERSION.search(setup.read_text()) if setup is not None else None
  if found is None: raise CheckoutError(f"{folder}: no setup.py or pyproject.toml with tinygrad's version")
  if found.group(1) != version:
    raise CheckoutError(f"{folder} is tinygrad {found.group(1)}; the installed tinygrad is {version}: check out v{version} "
                        f"(its tests run in the checkout and import its tinygrad package)")
  missing = [f for f in files if not (folder / "test" / f).is_file()]
  if missing: raise CheckoutError(f"no such test file in {folder / 'test'}: {', '.join(missing)}")
  return folder


# ***** the pytest plugin (-p refimpl.tinygrad.selftest) *****

def pytest_configure(config) -> None:
  """Makes $REFIMPL_SELFTEST_DEVICE tinygrad's default device before any test module imports tinygrad's tensors."""
  device = os.environ.get(DEVICE_ENV)
  if not device: return
  if line() == "0.14.0": return _configure_014(device)
  from tinygrad import Device
  if device == "REFIMPL":
    from refimpl.tinygrad.v0_10.reference import device_session, install_reference_device
    install_reference_device(default=True)
    if os.environ.get(SAVE_ENV): device_session().save_undefined = Path(os.environ[SAVE_ENV])
    return
  if device == "CLANG":
    from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
    why = prepare_tinygrad()["CLANG"]
    if why is not None: raise RuntimeError(f"tinygrad's CLANG does not run here: {why}")
  Device.DEFAULT = device


def _configure_014(device: str) -> None:
  """tinygrad 0.14: REFIMPL is refimpl.tinygrad.v0_14's device (with tinygrad's CPU prepared as for the CPU runs, since
  tests use it beside the default device); any other is chosen by name (DEV), with the toolchain
  refimpl.tinygrad.v0_14.toolchain gives CPU and CL where the machine has none of its own."""
  if device == "REFIMPL":
    from refimpl.tinygrad.v0_14.device import device_session
    from refimpl.tinygrad.v0_14.pytest_device import install_for_tests
    install_for_tests()
    if os.environ.get(SAVE_ENV): device_session().save_undefined = Path(os.environ[SAVE_ENV])
    return
  from refimpl.tinygrad.v0_14.toolchain import use_device
  why = use_device(device)  # CPU gets refimpl's clang, CL pyopencl's PoCL, where the machine has no other
  if why is not None: raise RuntimeError(f"tinygrad's {device} does not run here: {why}")


# ***** running and reading *****

@dataclass
class FileRun:
  """One test file on one device: every test's outcome ("passed", "failed", "skipped") and first error line."""
  file: str
  device: str
  seconds: float
  outcomes: dict[str, str] = field(default_factory=dict)
  errors: dict[str, str] = field(default_factory=dict)
  crashed: str = ""  # why no outcomes came back: "did not finish in N s", or the last line pytest printed

  def count(self, outcome: str) -> int: return sum(1 for o in self.outcomes.values() if o == outcome)


def run_file(root: Path, file: str, device: str, xml: Path, timeout: float = 3600, save: Path | None = None) -> FileRun:
  """pytest on test/<file> with `device` as tinygrad's default (in the sdist's root, so its test package imports);
  save: where REFIMPL saves a reproducer of each kernel with undefined behaviour."""
  env = {**os.environ, DEVICE_ENV: device, **({SAVE_ENV: str(save)} if save is not None else {})}
  cmd = [sys.executable, "-m", "pytest", f"test/{file}", "-q", "-p", "no:cacheprovider", "-p", "refimpl.tinygrad.selftest",
         "-p", "no:randomly", f"--junitxml={xml}", "-o", "addopts="]
  start = time.perf_counter()
  try: res = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
  except subprocess.TimeoutExpired:
    return FileRun(file, device, time.perf_counter() - start, crashed=f"did not finish in {timeout:.0f} s")
  run = FileRun(file, device, time.perf_counter() - start)
  if not xml.exists():
    lines = (res.stderr.strip() or res.stdout.strip()).splitlines()
    run.crashed = lines[-1] if lines else f"exit status {res.returncode}"
    return run
  for case in ET.parse(xml).getroot().iter("testcase"):
    name = f"{case.get('classname', '').rsplit('.', 1)[-1]}::{case.get('name')}"
    bad = next((x for x in (case.find("failure"), case.find("error")) if x is not None), None)
    if bad is not None:
      run.outcomes[name] = "failed"
      text = (bad.get("message") or bad.text or "").strip()
      run.errors[name] = page_relative(text.splitlines()[0], save)[:300] if text else ""
    elif case.find("skipped") is not None: run.outcomes[name] = "skipped"
    else: run.outcomes[name] = "passed"
  return run


def page_relative(message: str, save: Path | None) -> str:
  """The message with the reproducer folder `save` named as the page links it (its name: the folder lies beside the
  page), never as a path of the machine that ran the tests."""
  return message if save is None else message.replace(str(save), save.name)


ENVIRONMENT = "the environment (not the device)"
CLASSES = (("KernelUndefinedBehavior", "undefined behaviour (a finding against the test: replay it with the kernel named)"),
           ("TranslationError", "not translatable by refimpl's importer"),
           ("ModuleNotFoundError", ENVIRONMENT), ("URLError", ENVIRONMENT), ("Name or service not known", ENVIRONMENT),
           ("collection failure", ENVIRONMENT), ("No such file or directory: 'clang'", ENVIRONMENT),
           ("refimpl", "an error of refimpl's device"))

def failure_class(message: str) -> str:
  """The class of a REFIMPL failure, from its error's first line."""
  return next((what for key, what in CLASSES if key in message), "other")


def environment_only(r: FileRun) -> bool:
  """Whether every failure of a run is the environment's (a missing module, no network, a collection failure)."""
  return bool(r.count("failed")) and all(failure_class(r.errors.get(t, "")) == ENVIRONMENT
                                         for t, o in r.outcomes.items() if o == "failed")


def other_devices(runs: list[FileRun]) -> list[str]:
  """The devices REFIMPL is compared with: every other device of the runs, in order (CLANG and PYTHON for 0.10.1, CPU
  and PYTHON for 0.14 by default)."""
  return [d for d in dict.fromkeys(r.device for r in runs) if d != "REFIMPL"]


def refimpl_failures(runs: list[FileRun]) -> list[tuple[str, str, str, dict[str, str]]]:
  """(file, test, error, {other device: its outcome}) of every test that fails on REFIMPL."""
  by = {(r.file, r.device): r for r in runs}
  return [(r.file, t, r.errors.get(t, ""), {d: by[(r.file, d)].outcomes.get(t, "not run") for d in other_devices(runs)
                                            if (r.file, d) in by})
          for r in runs if r.device == "REFIMPL" for t, o in r.outcomes.items() if o == "failed"]


def refimpl_only(runs: list[FileRun]) -> list[tuple[str, str, str]]:
  """(file, test, error) of every test that fails on REFIMPL and passes on every other device (other_devices) that
  ran its file."""
  by = {(r.file, r.device): r for r in runs}
  out = []
  for r in runs:
    if r.device != "REFIMPL": continue
    others = [by[(r.file, d)] for d in other_devices(runs) if (r.file, d) in by]
    for test, outcome in r.outcomes.items():
      if outcome == "failed" and others and all(o.outcomes.get(test) == "passed" for o in others):
        out.append((r.file, test, r.errors.get(test, "")))
  return out


# ***** the table *****

def markdown(runs: list[FileRun], devices: list[str], command: str, version: str = VERSION) -> str:
  files = list(dict.fromkeys(r.file for r in runs))
  by = {(r.file, r.device): r for r in runs}
  def cell(r: FileRun | None) -> str:
    if r is None: return "not run"
    if r.crashed: return f"no result: {r.crashed}"
    return f"{r.count('passed')} passed, {r.count('failed')} failed, {r.count('skipped')} skipped, {r.seconds:.0f} s"
  out = [f"# tinygrad {version}'s own tests on refimpl's reference device", "", f"Made by `{command}`.", "",
         "| file | " + " | ".join(devices) + " |", "|---|" + "---|" * len(devices)]
  out += [f"| {f} | " + " | ".join(cell(by.get((f, d))) for d in devices) + " |" for f in files]
  totals = [sum(by[(f, d)].count("passed") for f in files if (f, d) in by) for d in devices]
  out += ["| **total passed** | " + " | ".join(str(t) for t in totals) + " |", ""]
  fails, others = refimpl_failures(runs), other_devices(runs)
  out += [f"## Failing on REFIMPL ({len(refimpl_only(runs))} of them pass on {' and '.join(others) or 'no other device'})",
          "",
          "An undefined-behaviour failure is a finding against the test: its message names the kernel, the uop and the "
          "lane, and the reproducer saved in tinygrad-selftest-undefined/ reruns with `python -m refimpl.fuzz replay`.", ""]
  if not fails: out += ["None.", ""]
  else:
    out += ["| file | test | class | " + " | ".join(others) + " | error |", "|---|---|---|" + "---|" * (len(others) + 1)]
    out += [f"| {f} | {t} | {failure_class(e)} | " + " | ".join(o.get(d, "not run") for d in others) +
            f" | {e.replace('|', '/')} |" for f, t, e, o in fails] + [""]
  return "\n".join(out)


def html_page(runs: list[FileRun], devices: list[str], command: str, version: str = VERSION, prov: dict | None = None,
              undefined: list[str] | None = None, up: str | None = None) -> str:
  """The table as a page: per file and device the counts (red: a failure of the device or of refimpl; amber: only the
  environment's), the totals, every REFIMPL failure with its class, and links to the undefined-behaviour reproducers
  (`undefined`: their paths relative to the page)."""
  from refimpl.testing import report_html as rh
  files = list(dict.fromkeys(r.file for r in runs))
  by = {(r.file, r.device): r for r in runs}
  esc = html.escape
  def cell(r: FileRun | None) -> str:
    if r is None: return "<td class=untested>not run</td>"
    if r.crashed: return f"<td class=fail>no result: {esc(r.crashed)}</td>"
    cls = ("relaxed" if environment_only(r) else "fail") if r.count("failed") else "pass"
    return (f"<td class={cls}>{r.count('passed')} passed, {r.count('failed')} failed, {r.count('skipped')} skipped"
            f"<br><small>{r.seconds:.0f} s</small></td>")
  rows = "".join(f"<tr><th>{esc(f)}</th>{''.join(cell(by.get((f, d))) for d in devices)}</tr>" for f in files)
  totals = "".join(f"<td><b>{sum(by[(f, d)].count(o) for f in files if (f, d) in by)}</b></td>" for d in devices
                   for o in ("passed",))
  failed = "".join(f"<td>{sum(by[(f, d)].count('failed') for f in files if (f, d) in by)}</td>" for d in devices)
  others = other_devices(runs)
  def row(f: str, t: str, e: str, o: dict) -> str:
    cls = failure_class(e)
    outcomes = "".join(f"<td>{esc(o.get(d, 'not run'))}</td>" for d in others)
    return (f"<tr><td>{esc(f)}</td><td><code>{esc(t)}</code></td><td class={'relaxed' if cls == ENVIRONMENT else 'fail'}>"
            f"{esc(cls)}</td>{outcomes}<td>{rh.message_html(e, 4)}</td></tr>")
  fails = "".join(row(*x) for x in refimpl_failures(runs)) or f"<tr><td colspan={len(others) + 4}>None.</td></tr>"
  links = "".join(f"<li><a href='{esc(u)}'>{esc(u)}</a>: <code>python -m refimpl.fuzz replay docs/conformance/{esc(u)}"
                  "</code></li>" for u in undefined or [])
  body = [rh.provenance_html(prov or {"command": command}, up),
          f"<h1>tinygrad {version}'s own tests on refimpl's reference device</h1>",
          "<p>Each of tinygrad's test files, run on REFIMPL (refimpl's reference device) and on tinygrad's own devices. "
          "Green: no failure; red: a failure of the device (or of refimpl); amber: failures of the environment only (a "
          "missing module such as torch, no network, a file that does not collect), which say nothing about the "
          "device.</p>",
          f"<table><tr><th>file</th>{''.join(f'<th>{esc(d)}</th>' for d in devices)}</tr>{rows}"
          f"<tr><th>total passed</th>{totals}</tr><tr><th>total failed</th>{failed}</tr></table>",
          f"<h2>Failing on REFIMPL ({len(refimpl_only(runs))} of them pass on {esc(' and '.join(others) or 'no other device')})"
          "</h2>",
          "<p>An undefined-behaviour failure is a finding against the test: its message names the kernel, the uop and the "
          "lane; its reproducer is below.</p>",
          f"<table><tr><th>file</th><th>test</th><th>class</th>{''.join(f'<th>{esc(d)}</th>' for d in others)}"
          f"<th>error</th></tr>{fails}</table>",
          f"<h2>Undefined-behaviour reproducers ({len(undefined or [])})</h2>",
          f"<ul>{links}</ul>" if links else "<p>None saved.</p>"]
  return rh.page(f"tinygrad {version}'s own tests on refimpl", "\n".join(body))


def save_runs(out: Path, version: str, runs: list[FileRun], devices: list[str], prov: dict) -> None:
  """The runs as JSON beside the pages (what rebuild_pages reads)."""
  doc = {"version": version, "devices": devices, "provenance": prov, "runs": [asdict(r) for r in runs]}
  (out / f"{page_name(version)}.json").write_text(json.dumps(doc, indent=1) + "\n")


def write_pages(out: Path, version: str, runs: list[FileRun], devices: list[str], prov: dict) -> None:
  """tinygrad-selftest.md and .html (or the 0.14 line's) from the runs."""
  folder = out / "tinygrad-selftest-undefined"  # shared by the lines: a page links the reproducers its failures name
  named = " ".join(e for r in runs for e in r.errors.values())
  saved = folder.glob("*.json") if folder.exists() else []
  undefined = sorted(p.relative_to(out).as_posix() for p in saved if re.search(rf"\b{re.escape(p.stem)}\b", named))
  up = "index.html" if (out / "index.html").exists() else None
  (out / f"{page_name(version)}.md").write_text(markdown(runs, devices, prov["command"], version))
  (out / f"{page_name(version)}.html").write_text(html_page(runs, devices, prov["command"], version, prov, undefined, up))


def rebuild_pages(out: Path, version: str = VERSION) -> None:
  """The pages again from the saved runs (nothing is rerun)."""
  doc = json.loads((out / f"{page_name(version)}.json").read_text())
  write_pages(out, doc["version"], [FileRun(**r) for r in doc["runs"]], doc["devices"], doc["provenance"])


def selftest(files: list[str], devices: list[str], out: Path, log=print, timeout: float = 1200,
             checkout: Path | None = None) -> list[FileRun]:
  """Fetch (or take the tinygrad `checkout`, checkout_root), run every (file, device) (each for at most `timeout`
  seconds: then its cell says so), write the table to out; returns the runs."""
  version = line()
  root = fetch_sdist(version=version) if checkout is None else checkout_root(checkout, version, files)
  out = out.resolve()  # the test processes run in the tests' root
  out.mkdir(parents=True, exist_ok=True)
  runs = []
  for f in files:
    for d in devices:
      xml = out / f".selftest-{Path(f).stem}-{d}.xml"
      xml.unlink(missing_ok=True)
      run = run_file(root, f, d, xml, timeout, out / "tinygrad-selftest-undefined")
      xml.unlink(missing_ok=True)
      log(f"{f} on {d}: {run.count('passed')} passed, {run.count('failed')} failed, {run.count('skipped')} skipped "
          f"({run.seconds:.0f} s){' ' + run.crashed if run.crashed else ''}")
      runs.append(run)
  command = (f"python -m refimpl.tinygrad selftest --files {','.join(files)} --devices {','.join(devices)} "
             f"--timeout {timeout:.0f}{'' if checkout is None else f' --tests {checkout.name}'}")
  from refimpl.testing.provenance import provenance
  prov = provenance(command)
  save_runs(out, version, runs, devices, prov)
  write_pages(out, version, runs, devices, prov)
  return runs
