"""The pytest plugin of the spec suite: backend selection and the conformance report.

  --backend NAME[,NAME]     run the differential tests on these devices (repeatable); default: every device that opens
  --backend module:Class    a third-party Compiled subclass (registered under its `device_name`, else its class name
                            without a "Device" suffix, upper-cased); installed backends are also discovered through the
                            `refimpl.backends` entry-point group
  --conformance-report PATH op x dtype x backend -> pass / fail (with an example) / unsupported / relaxed (an op the
                            device declares inexact, Renderer.inexact_ops), as markdown (PATH), HTML (PATH with .html: an
                            op x dtype grid per backend) and JSON (PATH with .json: the data, read by other reports)

  --xfail PATTERN           a known failure: matching tests are expected to fail (repeatable); --xfail-file FILE reads
                            one pattern per line (# comments); --only PATTERN keeps only matching tests, --skip PATTERN
                            leaves matching ones out. A pattern (fnmatch) matches a backend test's parametrization id,
                            e.g. "MY-IDIV-i8", "*-IDIV-*", "*-f16*", or its name. EXPECTATIONS takes the same in Python.

Tests take the `backend` fixture (parametrized over the selected devices that open) and the `conformance` fixture (the
session's recorder). Devices that do not open are reported once, after collection and in the summary, never as one skip
per test. pytest loads this plugin through refimpl's `pytest11` entry point; it does nothing (opens no device) in a run
that has no test taking `backend`. Hypothesis profiles `ci` (200 examples), `dev` (30), `thorough` (5000) and `flush`
(10000, for bug hunts: docs/architecture.md, "Flushing out") are registered here; the suites' conftest files load
REFIMPL_HYPOTHESIS_PROFILE (default ci). A failing hypothesis test prints its example and the blob that replays it.
"""
from __future__ import annotations

import fnmatch
import json
import os
import pathlib
import re
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from refimpl.device import ALL_DEVICES, Device, load_object
from refimpl.testing import report_html as rh
from refimpl.testing.report_html import STATUSES

_THIRD_PARTY = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
PROFILES = {"ci": 200, "dev": 30, "thorough": 5000, "flush": 10000}  # flush: 50x ci, for long bug hunts

def _register_hypothesis_profiles() -> None:
  """Registers PROFILES (so that --hypothesis-profile dev works from the start); nothing without hypothesis. A failure
  prints its example and the `@reproduce_failure` blob that replays it (print_blob), beside hypothesis's seed line."""
  try:
    from hypothesis import HealthCheck, settings
  except ImportError: return
  for name, examples in PROFILES.items():
    settings.register_profile(name, max_examples=examples, deadline=None, print_blob=True,
                              suppress_health_check=[HealthCheck.too_slow])

_register_hypothesis_profiles()

def load_hypothesis_profile() -> None:
  """Loads REFIMPL_HYPOTHESIS_PROFILE (default ci); --hypothesis-profile still wins. Called by the suites' conftest
  files (a pytest run of another project keeps its own profile)."""
  from hypothesis import settings
  settings.load_profile(os.environ.get("REFIMPL_HYPOTHESIS_PROFILE", "ci"))

def pytest_addoption(parser: pytest.Parser) -> None:
  group = parser.getgroup("refimpl", "refimpl spec suite")
  group.addoption("--backend", action="append", default=[], metavar="NAME[,NAME]|module:Class",
                  help="devices to test (default: every device that opens here)")
  group.addoption("--conformance-report", default=None, metavar="PATH", help="write the op x dtype x backend report here")
  group.addoption("--xfail", action="append", default=[], metavar="PATTERN", help="tests expected to fail (known failures)")
  group.addoption("--xfail-file", default=None, metavar="FILE", help="known failures, one pattern per line")
  group.addoption("--only", action="append", default=[], metavar="PATTERN", help="run only the matching backend tests")
  group.addoption("--skip", action="append", default=[], metavar="PATTERN", help="leave the matching backend tests out")
  group.addoption("--backend-tests-only", action="store_true", default=False,
                  help="run only the tests that take the backend fixture (those whose result depends on --backend)")
  group.addoption("--properties-only", action="store_true", default=False,
                  help="run only the hypothesis property tests that take no backend (with --hypothesis-profile flush: "
                       "a long bug hunt over the passes, the emulator and the IR)")


@dataclass
class Expectations:
  """A porter's declarations (fnmatch patterns over backend tests' ids and names): known failures, and which tests to
  run. E.g. in a conftest.py: `EXPECTATIONS.xfail("MYDEV-IDIV-*", reason="floor division")`."""
  xfails: dict[str, str] = field(default_factory=dict)
  only_patterns: list[str] = field(default_factory=list)
  skip_patterns: list[str] = field(default_factory=list)

  def xfail(self, *patterns: str, reason: str = "declared a known failure") -> None:
    for p in patterns: self.xfails[p] = reason
  def only(self, *patterns: str) -> None: self.only_patterns += patterns
  def skip(self, *patterns: str) -> None: self.skip_patterns += patterns

  @staticmethod
  def matches(item: pytest.Item, patterns) -> bool:
    """Whether one of `patterns` matches the item's parametrization id, its name or its function's name."""
    callspec = getattr(item, "callspec", None)
    names = [callspec.id if callspec is not None else None, item.name, getattr(item, "originalname", item.name)]
    return any(n is not None and fnmatch.fnmatchcase(n, p) for n in names for p in patterns)

  def leaves_out(self, item: pytest.Item) -> bool:
    if self.only_patterns and not self.matches(item, self.only_patterns): return True
    return self.matches(item, self.skip_patterns)

  def xfail_reason(self, item: pytest.Item) -> str | None:
    return next((reason for p, reason in self.xfails.items() if self.matches(item, [p])), None)

EXPECTATIONS = Expectations()

def read_xfail_file(path: str) -> list[str]:
  """The patterns of an --xfail-file: one per line; blank lines and # comments ignored."""
  try: text = pathlib.Path(path).read_text()
  except OSError as e: raise pytest.UsageError(f"--xfail-file {path}: {e}") from None
  return [ln.split("#", 1)[0].strip() for ln in text.splitlines() if ln.split("#", 1)[0].strip()]

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
    if _THIRD_PARTY.match(item) and "." in item.split(":")[0]: names.append(register_third_party(item))
    else: names.append(item.upper() if item.count(":") < 2 else Device.canonicalize(item))  # KIND:module:Class keeps its case
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
    """The report as one self-contained page (refimpl.testing.report_html): per-backend counts, then per backend the op x
    dtype grid and the CAST / BITCAST grids coloured by status, each FAIL or relaxed cell linked to its reproducer."""
    backends = sorted({b for b, _ in self.results})
    def count_cell(backend: str, status: str) -> str:
      n = sum(1 for (b, _), (s, _) in self.results.items() if b == backend and s == status)
      return f"<td class={status if n else 'zero'}>{n}</td>"
    counts = "".join(f"<tr><th><a href='#b-{anchor(b)}'>{rh.esc(b)}</a></th>{''.join(count_cell(b, s) for s in STATUSES)}"
                     f"<td>{self.examples[b]:,}</td></tr>" for b in backends)
    parts = ["<h1>refimpl conformance report</h1>",
             f"<p>Backends: {rh.esc(', '.join(backends))}. Each cell of a grid is one op on one dtype (or one conversion) "
             "checked against the spec: sweeps of edge and random values and hypothesis examples.</p>",
             "<table><thead><tr><th>backend</th>" + "".join(f"<th class={s}>{rh.LABELS[s]}</th>" for s in STATUSES) +
             f"<th>lanes checked</th></tr></thead><tbody>{counts}</tbody></table>", rh.legend()]
    for b in backends:
      statuses = {c: s for (bb, c), (s, _) in self.results.items() if bb == b}
      parts += [f"<h2 id='b-{anchor(b)}'>{rh.esc(b)}</h2>", rh.grids(statuses, lambda c, b=b: f"#{anchor(b, c)}")]
    for status, title in (("fail", "Failures"), ("relaxed", "Relaxed (declared inexact by the device)")):
      found = [(b, c, d) for (b, c), (s, d) in sorted(self.results.items()) if s == status]
      parts.append(f"<h2>{title} ({len(found)})</h2>")
      parts += [f"<h3 id='{anchor(b, c)}'>{rh.esc(b)} {rh.esc(c)}</h3><pre>{rh.esc(d)}</pre>" for b, c, d in found]
    return rh.page("refimpl conformance", "\n".join(parts))

  def to_json(self) -> dict:
    return {"results": [[b, c, s, d] for (b, c), (s, d) in self.results.items()], "examples": dict(self.examples)}

  def merge(self, doc: dict) -> None:
    """Adds another process's results (a pytest-xdist worker's `to_json`), by the same rule as `record`."""
    for backend, case, status, detail in doc["results"]: self.record(backend, case, status, detail)
    for backend, n in doc["examples"].items(): self.examples[backend] += n


def anchor(backend: str, case: str = "") -> str:
  """The HTML id of a backend's section, or of its reproducer of `case` (the suite reports link to these)."""
  return re.sub(r"[^A-Za-z0-9_.-]", "_", f"r-{backend}-{case}" if case else backend)

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
  config.addinivalue_line("markers", "generated: a property checked over generated programs, as many as the hypothesis "
                                     "profile scales (refimpl.testing.generated.scaled); --properties-only keeps it")
  if config.pluginmanager.hasplugin("xdist"): config.pluginmanager.register(_XdistMerge(), "refimpl-xdist-merge")
  EXPECTATIONS.xfail(*config.getoption("xfail"), reason="declared with --xfail")
  if config.getoption("xfail_file"): EXPECTATIONS.xfail(*read_xfail_file(config.getoption("xfail_file")),
                                                        reason=f"declared in {config.getoption('xfail_file')}")
  EXPECTATIONS.only(*config.getoption("only"))
  EXPECTATIONS.skip(*config.getoption("skip"))

def selection_of(config: pytest.Config) -> Selection:
  """The backends under test, chosen (and opened) the first time a test asks for the `backend` fixture."""
  if not hasattr(config, "_refimpl_selection"): config._refimpl_selection = select_backends(config.getoption("backend"))
  return config._refimpl_selection

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
  """Applies EXPECTATIONS to the backend tests: --only / --skip deselect, --xfail marks expected failures;
  --backend-tests-only deselects every other test; --properties-only every test but hypothesis ones with no backend."""
  keep, dropped = [], []
  backend_only, properties_only = config.getoption("backend_tests_only"), config.getoption("properties_only")
  for name in getattr(config, "_refimpl_selection", Selection([], {})).available:  # a device's own declared failures
    for pattern, reason in getattr(Device[name], "known_failures", {}).items(): EXPECTATIONS.xfail(pattern, reason=reason)
  for item in items:
    backend_test = "backend" in getattr(item, "fixturenames", ())
    property_test = not backend_test and (getattr(getattr(item, "obj", None), "is_hypothesis_test", False) or
                                          item.get_closest_marker("generated") is not None)
    if (backend_test and EXPECTATIONS.leaves_out(item)) or (backend_only and not backend_test) or \
       (properties_only and not property_test):
      dropped.append(item)
      continue
    keep.append(item)
    reason = EXPECTATIONS.xfail_reason(item) if backend_test else None
    if reason is not None: item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
  if dropped:
    config.hook.pytest_deselected(items=dropped)
    items[:] = keep

def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
  workeroutput = getattr(session.config, "workeroutput", None)  # set in a pytest-xdist worker only
  if workeroutput is not None: workeroutput[_WORKER_KEY] = json.dumps(_CONFORMANCE.to_json())

def pytest_report_collectionfinish(config: pytest.Config, start_path, items) -> list[str]:
  if not hasattr(config, "_refimpl_selection"): return []
  selection: Selection = config._refimpl_selection
  lines = [f"refimpl backends under test: {', '.join(selection.available) or 'none'}"]
  lines += [f"refimpl backend not tested: {reason}" for reason in selection.unavailable.values()]
  return lines

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
  if "backend" in metafunc.fixturenames: metafunc.parametrize("backend", selection_of(metafunc.config).available)

@pytest.fixture(scope="session")
def conformance() -> Conformance: return _CONFORMANCE

def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
  if not hasattr(config, "_refimpl_selection") and not _CONFORMANCE.results: return  # not a refimpl suite run
  selection = selection_of(config)
  for name, reason in selection.unavailable.items(): terminalreporter.write_line(f"refimpl: {name} not tested: {reason}")
  for backend in sorted({b for b, _ in _CONFORMANCE.results}):
    statuses = [s for (b, _), (s, _) in _CONFORMANCE.results.items() if b == backend]
    counts = ", ".join(f"{statuses.count(s)} {'FAIL' if s == 'fail' else s}" for s in STATUSES)
    terminalreporter.write_line(f"refimpl conformance of {backend}: {len(statuses)} op cases: {counts}")
  counts = ", ".join(f"{b}: {n:,} lanes" for b, n in sorted(_CONFORMANCE.examples.items()))
  if counts: terminalreporter.write_line(f"refimpl: op-level lanes checked against the spec: {counts}")
  path = config.getoption("conformance_report")
  if path:
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(_CONFORMANCE.markdown())
    target.with_suffix(".html").write_text(_CONFORMANCE.html())
    target.with_suffix(".json").write_text(json.dumps(_CONFORMANCE.to_json(), indent=0, sort_keys=True) + "\n")
    terminalreporter.write_line(f"refimpl: conformance report written to {target}, {target.with_suffix('.html')} and "
                                f"{target.with_suffix('.json')}")
