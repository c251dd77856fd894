"""The pytest plugin of the spec suite: backend selection and the conformance report.

  --backend NAME[,NAME]     run the differential tests on these devices (repeatable); default: every device that opens
  --backend module:Class    a third-party Compiled subclass (registered under its `device_name`, else its class name
                            without a "Device" suffix, upper-cased); installed backends are also discovered through the
                            `refimpl.backends` entry-point group
  --conformance-report PATH op x dtype x backend -> pass / fail (with an example) / unsupported / relaxed (an op the
                            device declares inexact, Renderer.inexact_ops), as markdown (PATH) and HTML (PATH with .html)

Tests take the `backend` fixture (parametrized over the selected devices that open) and the `conformance` fixture (the
session's recorder). Devices that do not open are reported once, in the header and the summary, never as one skip per test.
"""
from __future__ import annotations

import html
import json
import pathlib
import re
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from refimpl.device import ALL_DEVICES, Device, load_object

_THIRD_PARTY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")

def pytest_addoption(parser: pytest.Parser) -> None:
  group = parser.getgroup("refimpl", "refimpl spec suite")
  group.addoption("--backend", action="append", default=[], metavar="NAME[,NAME]|module:Class",
                  help="devices to test (default: every device that opens here)")
  group.addoption("--conformance-report", default=None, metavar="PATH", help="write the op x dtype x backend report here")

def register_third_party(spec: str) -> str:
  """Registers a `module:Class` backend with the device registry; returns its device name."""
  cls = load_object(spec)
  name = getattr(cls, "device_name", None) or cls.__name__.removesuffix("Device").upper()
  return Device.register(name, cls)

@dataclass
class Selection:
  available: list[str]
  unavailable: dict[str, str]

def select_backends(requested: list[str]) -> Selection:
  """The requested devices (or all known ones), split into those that open and those that do not (with the reason)."""
  names: list[str] = []
  for item in (s.strip() for opt in requested for s in opt.split(",")):
    if not item: continue
    names.append(register_third_party(item) if _THIRD_PARTY.match(item) and "." in item.split(":")[0] else item.upper())
  if not names: names = ALL_DEVICES + [d for d in Device._devices if d not in ALL_DEVICES]
  selection = Selection([], {})
  for name in names:
    reason = Device.open_error(name)
    if reason is None: selection.available.append(Device.canonicalize(name))
    else: selection.unavailable[name] = reason
  return selection

@dataclass
class Conformance:
  """What each (backend, case) did: pass, fail (with the first reproducer), or unsupported (with why)."""
  results: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
  examples: dict[str, int] = field(default_factory=lambda: defaultdict(int))

  def record(self, backend: str, case: str, status: str, detail: str = "", examples: int = 0) -> None:
    previous = self.results.get((backend, case))
    if previous is None or previous[0] == "pass" or status == "fail": self.results[(backend, case)] = (status, detail)
    self.examples[backend] += examples

  def markdown(self) -> str:
    backends = sorted({b for b, _ in self.results})
    cases = sorted({c for _, c in self.results})
    marks = {"pass": "pass", "fail": "**FAIL**", "unsupported": "unsupported", "relaxed": "relaxed"}
    lines = ["# refimpl conformance report", "", f"Backends: {', '.join(backends)}. Lanes checked: " +
             ", ".join(f"{b} {self.examples[b]:,}" for b in backends) + ".", "",
             "| case | " + " | ".join(backends) + " |", "|---|" + "---|" * len(backends)]
    for case in cases:
      cells = [marks.get(self.results.get((b, case), ("", ""))[0], "") for b in backends]
      lines.append(f"| {case} | " + " | ".join(cells) + " |")
    for status, title in (("fail", "Failures"), ("relaxed", "Relaxed (declared inexact by the device)")):
      found = [(b, c, d) for (b, c), (s, d) in sorted(self.results.items()) if s == status]
      lines += ["", f"## {title} ({len(found)})", ""]
      for backend, case, detail in found: lines += [f"### {backend} {case}", "", "```text", detail, "```", ""]
    return "\n".join(lines) + "\n"

  def html(self) -> str:
    return ("<!doctype html><meta charset=utf-8><title>refimpl conformance</title><pre>" + html.escape(self.markdown()) +
            "</pre>")

  def to_json(self) -> dict:
    return {"results": [[b, c, s, d] for (b, c), (s, d) in self.results.items()], "examples": dict(self.examples)}

  def merge(self, doc: dict) -> None:
    """Adds another process's results (a pytest-xdist worker's `to_json`), by the same rule as `record`."""
    for backend, case, status, detail in doc["results"]: self.record(backend, case, status, detail)
    for backend, n in doc["examples"].items(): self.examples[backend] += n

_CONFORMANCE = Conformance()
_WORKER_KEY = "refimpl_conformance"

class _XdistMerge:
  """With pytest-xdist: each worker hands its conformance results to the controller, which merges them (the report is
  written once, by the controller, with every worker's cases)."""
  @pytest.hookimpl(optionalhook=True)
  def pytest_testnodedown(self, node, error) -> None:
    doc = getattr(node, "workeroutput", {}).get(_WORKER_KEY)
    if doc is not None: _CONFORMANCE.merge(json.loads(doc))

def pytest_configure(config: pytest.Config) -> None:
  config._refimpl_selection = select_backends(config.getoption("backend"))
  if config.pluginmanager.hasplugin("xdist"): config.pluginmanager.register(_XdistMerge(), "refimpl-xdist-merge")

def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
  workeroutput = getattr(session.config, "workeroutput", None)  # set in a pytest-xdist worker only
  if workeroutput is not None: workeroutput[_WORKER_KEY] = json.dumps(_CONFORMANCE.to_json())

def pytest_report_header(config: pytest.Config) -> list[str]:
  selection: Selection = config._refimpl_selection
  lines = [f"refimpl backends under test: {', '.join(selection.available) or 'none'}"]
  lines += [f"refimpl backend not tested: {reason}" for reason in selection.unavailable.values()]
  return lines

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
  if "backend" in metafunc.fixturenames:
    metafunc.parametrize("backend", metafunc.config._refimpl_selection.available)

@pytest.fixture(scope="session")
def conformance() -> Conformance: return _CONFORMANCE

def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
  selection: Selection = config._refimpl_selection
  for name, reason in selection.unavailable.items(): terminalreporter.write_line(f"refimpl: {name} not tested: {reason}")
  counts = ", ".join(f"{b}: {n:,} lanes" for b, n in sorted(_CONFORMANCE.examples.items()))
  if counts: terminalreporter.write_line(f"refimpl: op-level lanes checked against the spec: {counts}")
  path = config.getoption("conformance_report")
  if path:
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_CONFORMANCE.markdown())
    target.with_suffix(".html").write_text(_CONFORMANCE.html())
    terminalreporter.write_line(f"refimpl: conformance report written to {target} and {target.with_suffix('.html')}")
