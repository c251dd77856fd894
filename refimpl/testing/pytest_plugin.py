"""The pytest plugin of the spec suite: backend selection and the conformance report.

  --backend NAME[,NAME]     run the differential tests on these devices (repeatable); default: every device that opens
  --backend module:Class    a third-party Compiled subclass (registered under its `device_name`, else its class name
                            without a "Device" suffix, upper-cased); installed backends are also discovered through the
                            `refimpl.backends` entry-point group. A backend named here that does not open, or on which
                            no test checks anything (all deselected or skipped), ends the run with exit status 2 and
                            the cause; without --backend, devices that do not open are listed as not tested
  --baseline NAME           judge the backends against the device they derive from (refimpl.testing.baseline): a
                            failure the baseline shows on the same inputs is reported "as on the baseline" (an
                            expected failure), and the summary counts the differences
  --conformance-report PATH op x dtype x backend -> pass / fail (with an example) / unsupported / relaxed (an op the
                            device declares inexact, Renderer.inexact_ops), as markdown (PATH), HTML (PATH with .html: an
                            op x dtype grid per backend) and JSON (PATH with .json: the data, read by other reports);
                            every failing backend test is listed with its message and the command that reruns it,
                            failures of one kind and message grouped, and the page names its commit, date, toolchains
                            and command (refimpl.testing.provenance)
  --conformance-command TEXT the command the report names as the one that made it (default: this pytest command)
  --conformance-up HREF     a link from the report back to an index page (the published pages: docs/conformance)

  --xfail PATTERN           a known failure: matching tests are expected to fail (repeatable); --xfail-file FILE reads
                            one pattern per line (# comments); --only PATTERN keeps only matching tests, --skip PATTERN
                            leaves matching ones out. A pattern (fnmatch) matches a backend test's parametrization id,
                            e.g. "MY-IDIV-i8", "*-IDIV-*", "*-f16*", or its name. EXPECTATIONS takes the same in Python.

Tests take the `backend` fixture (parametrized over the selected devices that open) and the `conformance` fixture (the
session's recorder). A test that raises refimpl.errors.NotTranslatable (a program refimpl cannot export to the device)
is "not tested (refimpl cannot export: ...)": skipped and counted apart, never the device's failure. Devices that do
not open are reported once, after collection and in the summary, never as one skip
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
from collections import Counter, defaultdict
from dataclasses import dataclass, field

import pytest

from refimpl.device import ALL_DEVICES, Device, load_object
from refimpl.errors import NotTranslatable
from refimpl.runner import Kernel
from refimpl.testing import report_html as rh
from refimpl.testing.baseline import BaselineWatcher
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
  group.addoption("--baseline", default=None, metavar="NAME|module:Class",
                  help="judge the backends against this device: only failures it does not share are differences")
  group.addoption("--conformance-report", default=None, metavar="PATH", help="write the op x dtype x backend report here")
  group.addoption("--conformance-command", default=None, metavar="TEXT", help="the command the report names as its maker")
  group.addoption("--conformance-up", default=None, metavar="HREF", help="a link from the report back to an index page")
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
  selection = Selection([], {})
  for item in (s.strip() for opt in requested for s in opt.split(",")):
    if not item: continue
    try: names.append(select_name(item))
    except Exception as e: selection.unavailable[item] = f"{item}: cannot import it: {type(e).__name__}: {e}"
  if not names and not selection.unavailable: names = ALL_DEVICES + [d for d in Device._devices if d not in ALL_DEVICES]
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
  inherited: set[tuple[str, str]] = field(default_factory=set)  # cells with a failing test the --baseline shares
  differing: set[tuple[str, str]] = field(default_factory=set)  # cells with a failing test it does not
  baseline: str | None = None
  failed_tests: list[dict] = field(default_factory=list)  # {backend, test, message}: the controller's, never merged
  not_tested: dict[str, str] = field(default_factory=dict)  # device -> why it did not open here
  profile: str = ""  # the hypothesis profile of the run
  provenance: dict = field(default_factory=dict)
  up: str | None = None

  def record(self, backend: str, case: str, status: str, detail: str = "", examples: int = 0) -> None:
    previous = self.results.get((backend, case))
    detail = rh.scrub(detail)  # no absolute path of this machine in the report
    if previous is None or previous[0] == "pass" or status == "fail": self.results[(backend, case)] = (status, detail)
    self.examples[backend] += examples

  def status(self, backend: str, case: str) -> str:
    """The cell's status: a failure every failing test of which the baseline shares is "baseline"."""
    status = self.results[(backend, case)][0]
    if status == "fail" and (backend, case) in self.inherited and (backend, case) not in self.differing: return "baseline"
    return status

  def cells(self) -> dict[tuple[str, str], tuple[str, str]]:
    """(backend, case) -> (status, detail), with status() applied."""
    return {(b, c): (self.status(b, c), d) for (b, c), (_, d) in self.results.items()}

  def headline(self) -> str:
    """The baseline sentence of the report ("" without --baseline)."""
    if self.baseline is None: return ""
    cells = self.cells()
    differ = sum(1 for s, _ in cells.values() if s == "fail")
    shared = sum(1 for s, _ in cells.values() if s == "baseline")
    return (f"Judged against the baseline {self.baseline}: {differ} op cell{'s' * (differ != 1)} differ from it (FAIL), "
            f"{shared} fail as on the baseline.")

  def markdown(self) -> str:
    backends = sorted({b for b, _ in self.results})
    cases = sorted({c for _, c in self.results})
    cells = self.cells()
    marks = {"pass": "pass", "fail": "**FAIL**", "unsupported": "unsupported", "relaxed": "relaxed",
             "baseline": "as baseline", "untested": "not tested"}
    lines = ["# refimpl conformance report", "", f"Backends: {', '.join(backends)}. Lanes checked: " +
             ", ".join(f"{b} {self.examples[b]:,}" for b in backends) + ".", "",
             *([self.headline(), ""] if self.baseline else []),
             "| case | " + " | ".join(backends) + " |", "|---|" + "---|" * len(backends)]
    for case in cases:
      row = [marks.get(cells.get((b, case), ("", ""))[0], "") for b in backends]
      lines.append(f"| {case} | " + " | ".join(row) + " |")
    for status, title in (("fail", "Failures"), ("relaxed", "Relaxed (declared inexact by the device)"),
                          ("baseline", "Failures as on the baseline"), ("untested", "Not tested (refimpl cannot export)")):
      found = [(b, c, d) for (b, c), (s, d) in sorted(cells.items()) if s == status]
      if not found and status in ("baseline", "untested"): continue
      lines += ["", f"## {title} ({len(found)})", ""]
      for backend, case, detail in found:
        kind = f" ({rh.KIND_LABELS[rh.failure_kind(detail)]})" if status == "fail" else ""
        lines += [f"### {backend} {case}{kind}", "", "```text", rh.scrub(detail), "```", ""]
    lines += ["", f"## Failing tests ({len(self.failed_tests)})", ""]
    for group in self.failure_groups():
      lines += [f"### {group['kind']}: {group['first']} ({len(group['tests'])} tests)", "",
                *[f"- `{t['test']}`: `{rerun_command(t)}`" for t in group["tests"]], ""]
    return "\n".join(lines) + "\n"

  def failure_groups(self) -> list[dict]:
    """The failing tests grouped by backend, kind and message (its first line with numbers and quoted names masked),
    largest group first: {kind, first (a member's first line), tests}."""
    groups: dict[tuple, dict] = {}
    for t in self.failed_tests:
      first = rh.first_line(t["message"])
      key = (t["backend"], test_kind(t["message"]), shape(t["message"]))
      g = groups.setdefault(key, {"backend": t["backend"], "kind": test_kind(t["message"]), "first": first, "tests": []})
      g["tests"].append(t)
    return sorted(groups.values(), key=lambda g: (g["backend"], -len(g["tests"]), g["first"]))

  def html(self) -> str:
    """The report as one self-contained page (refimpl.testing.report_html): where it comes from, per-backend counts and
    pass rates, then per backend the op x dtype and CAST / BITCAST grids coloured by status and kind of failure (a grid
    with nothing but passes and n/a collapsed), each FAIL or relaxed cell linked to its reproducer, then every failing
    test, grouped, with the command that reruns it."""
    backends = sorted({b for b, _ in self.results})
    cells = self.cells()
    shown = tuple(s for s in STATUSES if s in STATUSES[:4] or any(v == s for v, _ in cells.values()))
    def count_cell(backend: str, status: str) -> str:
      n = sum(1 for (b, _), (s, _) in cells.items() if b == backend and s == status)
      return f"<td class={status if n else 'zero'}>{n}</td>"
    def kinds(backend: str) -> str:
      found = Counter(rh.failure_kind(d) for (b, _), (s, d) in cells.items() if b == backend and s == "fail")
      return ", ".join(f"{n} {rh.KIND_LABELS[k]}" for k, n in found.most_common()) or "-"
    def rate(backend: str) -> str:
      return rh.pass_rate(Counter(s for (b, _), (s, _) in cells.items() if b == backend))
    failing = Counter(t["backend"] for t in self.failed_tests)
    counts = "".join(f"<tr><th><a href='#b-{anchor(b)}'>{rh.esc(b)}</a></th><td>{rh.esc(rate(b))}</td>"
                     f"{''.join(count_cell(b, s) for s in shown)}<td>{rh.esc(kinds(b))}</td><td>{self.examples[b]:,}</td>"
                     f"<td><a href='#failing-tests'>{failing.get(b, 0)}</a></td></tr>" for b in backends)
    not_tested = "".join(f"<li><b>{rh.esc(d)}</b>: {rh.esc(rh.scrub(why))}</li>" for d, why in sorted(self.not_tested.items()))
    title = f"refimpl conformance of {', '.join(backends) or 'no backend'}"
    parts = [rh.provenance_html(self.provenance, self.up), f"<h1>{rh.esc(title)}</h1>",
             f"<p>Backends tested: {rh.esc(', '.join(backends))}"
             + (f"; hypothesis profile <code>{rh.esc(self.profile)}</code> ({PROFILES.get(self.profile, '?')} examples per "
                "property" + (", --quick" if self.profile == "dev" else "") + ")" if self.profile else "") + ". Each grid cell "
             "is one op on one dtype (or one conversion) checked against the spec: sweeps of edge and random values and "
             "hypothesis examples. The pass rate is over the cases the device supports.</p>",
             *([f"<p><b>Not tested</b> (the device does not open here):</p><ul>{not_tested}</ul>"] if not_tested else []),
             *([f"<p><b>{rh.esc(self.headline())}</b></p>"] if self.baseline else []),
             "<table><thead><tr><th>backend</th><th>pass rate</th>" + "".join(f"<th class={s}>{rh.LABELS[s]}</th>"
                                                                             for s in shown) +
             f"<th>FAIL by kind</th><th>lanes checked</th><th>failing tests</th></tr></thead><tbody>{counts}</tbody></table>",
             rh.legend(shown)]
    for b in backends:
      statuses = {c: s for (bb, c), (s, _) in cells.items() if bb == b}
      details = {c: d for (bb, c), (_, d) in cells.items() if bb == b}
      grid = rh.grids(statuses, lambda c, b=b: f"#{anchor(b, c)}", details)
      if all(v in ("pass", "unsupported") for v in statuses.values()):
        passed = sum(v == "pass" for v in statuses.values())
        grid = f"<details><summary>all {passed} supported cases pass: the grids</summary>{grid}</details>"
      parts += [f"<h2 id='b-{anchor(b)}'>{rh.esc(b)}</h2>", grid]
    for status, heading in (("fail", "Failures"), ("relaxed", "Relaxed (declared inexact by the device)"),
                            ("baseline", "Failures as on the baseline"), ("untested", "Not tested (refimpl cannot export)")):
      found = [(b, c, d) for (b, c), (s, d) in sorted(cells.items()) if s == status]
      if not found and status in ("baseline", "untested"): continue
      parts.append(f"<h2>{heading} ({len(found)})</h2>")
      groups: dict[tuple, list] = defaultdict(list)
      for b, c, d in found: groups[(b, rh.failure_kind(d) if status == "fail" else status, shape(d))].append((b, c, d))
      for (b, kind, _), members in groups.items():
        what = f" <span class=muted>({rh.esc(rh.KIND_MEANING[kind])})</span>" if status == "fail" else ""
        if len(members) == 1:
          _, c, d = members[0]
          parts.append(f"<h3 id='{anchor(b, c)}'>{rh.esc(b)} {rh.esc(c)}{what}</h3>{rh.message_html(d, 40)}")
          continue
        names = ", ".join(rh.esc(c) for _, c, _ in members)
        parts.append(f"<h3>{rh.esc(b)}: {len(members)} cases failing alike{what}</h3><p>{names}</p>")
        parts += [f"<details id='{anchor(b, c)}'{' open' if k == 0 else ''}><summary>{rh.esc(c)}</summary>"
                  f"{rh.message_html(d, 40)}</details>" for k, (_, c, d) in enumerate(members)]
    parts.append(self._failing_tests_html())
    return rh.page(title, "\n".join(parts))

  def _failing_tests_html(self) -> str:
    out = [f"<h2 id='failing-tests'>Failing tests ({len(self.failed_tests)})</h2>",
           "<p>Every backend test that failed (the op cases above, the programs and the rules), grouped by backend, kind "
           "and message; each with the command that reruns it from the repository root.</p>"]
    for k, g in enumerate(self.failure_groups()):
      tests = "".join(f"<li><code>{rh.esc(t['test'])}</code><br><code class=muted>{rh.esc(rerun_command(t))}</code></li>"
                      for t in g["tests"])
      out.append(f"<h3 id='t-{k}'>{rh.esc(g['backend'])}: {rh.esc(g['kind'])}, {len(g['tests'])} "
                 f"test{'s' * (len(g['tests']) != 1)}</h3>{rh.message_html(g['tests'][0]['message'])}"
                 + (f"<ul>{tests}</ul>" if len(g["tests"]) < 6 else
                    f"<details><summary>the {len(g['tests'])} tests</summary><ul>{tests}</ul></details>"))
    return "\n".join(out)

  def to_json(self) -> dict:
    """The data: with --baseline, a cell's status is status()'s, and the raw sets travel too (for merge)."""
    cells = self.cells()
    return {"results": [[b, c, s, d] for (b, c), (s, d) in cells.items()], "examples": dict(self.examples),
            "kinds": [[b, c, rh.failure_kind(d)] for (b, c), (s, d) in cells.items() if s == "fail"],
            "failed_tests": self.failed_tests, "not_tested": self.not_tested, "provenance": self.provenance, "up": self.up,
            "profile": self.profile,
            "baseline": self.baseline, "inherited": sorted(self.inherited), "differing": sorted(self.differing)}

  @classmethod
  def from_json(cls, doc: dict) -> Conformance:
    """The report a `to_json` document holds (the pages are rebuilt from it: rewrite_report)."""
    c = cls(baseline=doc.get("baseline"))
    for backend, case, status, detail in doc["results"]: c.results[(backend, case)] = (status, detail)
    c.examples.update(doc["examples"])
    c.failed_tests, c.not_tested, c.provenance = doc.get("failed_tests", []), doc.get("not_tested", {}), doc.get("provenance", {})
    c.up, c.profile = doc.get("up"), doc.get("profile", "")
    c.inherited, c.differing = {tuple(x) for x in doc.get("inherited", ())}, {tuple(x) for x in doc.get("differing", ())}
    return c

  def merge(self, doc: dict) -> None:
    """Adds another process's results (a pytest-xdist worker's `to_json`), by the same rule as `record`."""
    for backend, case, status, detail in doc["results"]:
      self.record(backend, case, "fail" if status == "baseline" else status, detail)
    for backend, n in doc["examples"].items(): self.examples[backend] += n
    self.inherited |= {tuple(x) for x in doc.get("inherited", ())}
    self.differing |= {tuple(x) for x in doc.get("differing", ())}


def shape(message: str) -> str:
  """What failures that fail alike share: the first two lines of the message with numbers, quoted text, dtypes, op
  names and case ids masked (the key by which the pages group them)."""
  lines = [ln for ln in message.splitlines() if ln.strip()][:2]
  return re.sub(r"\d+|'[^']*'|\"[^\"]*\"|dtypes\.\w+|Ops\.\w+|\b[A-Z][A-Z0-9]+\b(-\w+)*|np\.\w+\([^)]*\)", "#",
                " | ".join(lines))


def test_kind(message: str) -> str:
  """A failing test's kind, in words: a kernel that never ran says why (failure_kind), else a wrong result. A test's
  own failed assert (an AssertionError) is never read as a renderer's refusal, which failure_kind takes AssertionError
  for only where the op suite says the kernel did not run."""
  if "does not run:" in message: return rh.KIND_MEANING[rh.failure_kind(message)]
  own_assert = message.lstrip().startswith("AssertionError")
  for kind in ("compile-error", "render-error", "crash"):
    if kind == "render-error" and own_assert: continue
    if rh.failure_kind(f"does not run: {message}") == kind: return rh.KIND_MEANING[kind]
  return "a wrong result or a broken rule (the message says which)"


def rerun_command(t: dict) -> str:
  """The command that reruns one failing test (from the repository root; the packaged suite's ids as they are)."""
  return f"python -m pytest '{t['test']}' --backend {t['backend']} -p no:cacheprovider"


def _failure_message(report: pytest.TestReport) -> str:
  """A failing test's message, whole (its exception's text; the report's last 4,000 characters otherwise), scrubbed."""
  crash = getattr(report.longrepr, "reprcrash", None)
  text = getattr(crash, "message", None) or report.longreprtext[-4000:]
  return rh.scrub(text[:8000])


def rewrite_report(json_path: pathlib.Path, up: str | None = None) -> None:
  """The report's markdown and HTML again from its JSON (PATH.json beside PATH.md and PATH.html), with a link back to
  `up` when given: nothing is rerun."""
  c = Conformance.from_json(json.loads(json_path.read_text()))
  c.up = up or c.up
  json_path.with_suffix(".md").write_text(c.markdown())
  json_path.with_suffix(".html").write_text(c.html())


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
                                     "profile scales (spec_tests/generated.py: scaled); --properties-only keeps it")
  if config.pluginmanager.hasplugin("xdist"): config.pluginmanager.register(_XdistMerge(), "refimpl-xdist-merge")
  EXPECTATIONS.xfail(*config.getoption("xfail"), reason="declared with --xfail")
  if config.getoption("xfail_file"): EXPECTATIONS.xfail(*read_xfail_file(config.getoption("xfail_file")),
                                                        reason=f"declared in {config.getoption('xfail_file')}")
  EXPECTATIONS.only(*config.getoption("only"))
  EXPECTATIONS.skip(*config.getoption("skip"))
  if config.getoption("backend") or config.getoption("baseline"): _open_named_devices(config)

def _refuse(config: pytest.Config, message: str) -> None:
  """Ends the run with exit status 2 and the cause (a pytest-xdist worker leaves that to the controller)."""
  if hasattr(config, "workerinput"): raise pytest.UsageError(message)
  pytest.exit(f"refimpl: {message}", returncode=2)

def _open_named_devices(config: pytest.Config) -> None:
  """A device named with --backend or --baseline must open: one that does not is the run's error (exit 2), never a
  silent skip. With --baseline, every kernel of a backend test is also run on the baseline (BaselineWatcher)."""
  selection = selection_of(config)
  if selection.unavailable:
    _refuse(config, "; ".join(f"--backend {name} does not open: {why}" for name, why in selection.unavailable.items()))
  baseline = config.getoption("baseline")
  if baseline is None: return
  try:
    name = select_name(baseline)
    why = Device.open_error(name)
  except Exception as e: why = f"{type(e).__name__}: {e}"
  if why is not None: _refuse(config, f"--baseline {baseline} does not open: {why}")
  name = Device.canonicalize(name)
  if name in selection.available: _refuse(config, f"--baseline {name} is also a --backend: a device is not its own baseline")
  _CONFORMANCE.baseline = name
  Kernel.watcher = BaselineWatcher(name)

def select_name(item: str) -> str:
  """A --backend / --baseline item as a device name (a module:Class is registered first)."""
  if _THIRD_PARTY.match(item) and "." in item.split(":")[0]: return register_third_party(item)
  return item.upper() if item.count(":") < 2 else Device.canonicalize(item)  # KIND:module:Class keeps its case

def selection_of(config: pytest.Config) -> Selection:
  """The backends under test, chosen (and opened) the first time a test asks for the `backend` fixture."""
  if not hasattr(config, "_refimpl_selection"): config._refimpl_selection = select_backends(config.getoption("backend"))
  return config._refimpl_selection

def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
  """Applies EXPECTATIONS to the backend tests: --only / --skip deselect, --xfail marks expected failures;
  --backend-tests-only deselects every other test; --properties-only every test but hypothesis ones with no backend.
  Each backend test carries its backend as a user property (the controller's tally reads it)."""
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
    if backend_test and hasattr(item, "callspec"): item.user_properties.append((_BACKEND, item.callspec.params["backend"]))
    reason = EXPECTATIONS.xfail_reason(item) if backend_test else None
    if reason is not None: item.add_marker(pytest.mark.xfail(reason=reason, strict=False))
  if dropped:
    config.hook.pytest_deselected(items=dropped)
    items[:] = keep

_BACKEND, _VERDICT = "refimpl_backend", "refimpl_verdict"

def _backend_of(item: pytest.Item) -> str | None:
  callspec = getattr(item, "callspec", None)
  return callspec.params.get("backend") if callspec is not None else None

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item):
  """With --baseline: the watcher compares this test's kernels on its backend with the baseline's."""
  backend = _backend_of(item)
  watcher = Kernel.watcher
  if isinstance(watcher, BaselineWatcher) and backend is not None: watcher.start(backend)
  yield

@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
  """A NotTranslatable is "not tested (refimpl cannot export)"; with --baseline, a failure the baseline shares on the
  same inputs is "as on the baseline" (an expected failure), one it does not share carries the differences."""
  report = (yield).get_result()
  backend = _backend_of(item)
  if call.when != "call" or backend is None: return
  case = getattr(getattr(item, "callspec", None), "params", {}).get("case")
  cell = (backend, case.id) if hasattr(case, "id") else None
  if call.excinfo is not None and call.excinfo.errisinstance(NotTranslatable) and report.failed:
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"not tested (refimpl cannot export: {call.excinfo.value})")
    report.user_properties.append((_VERDICT, "untested"))
    if cell is not None: _CONFORMANCE.record(*cell, "untested", f"refimpl cannot export: {call.excinfo.value}")
    return
  watcher = Kernel.watcher
  if not isinstance(watcher, BaselineWatcher) or watcher.current is None: return
  comparison = watcher.stop()
  if not report.failed or comparison is None: return
  if comparison.compared and not comparison.differences:
    report.outcome = "skipped"
    report.wasxfail = f"fails as on the baseline {watcher.baseline} (the same results on the same inputs)"
    report.user_properties.append((_VERDICT, "baseline"))
    if cell is not None: _CONFORMANCE.inherited.add(cell)
    return
  why = "\n".join(comparison.differences) or "not compared: the test failed before any kernel ran on the device"
  report.sections.append((f"refimpl: differences from the baseline {watcher.baseline}", why))
  report.user_properties.append((_VERDICT, "difference"))
  if cell is not None: _CONFORMANCE.differing.add(cell)

@dataclass
class Tally:
  """What the backend tests of one backend did (counted by the controller, from every worker's reports)."""
  selected: int = 0
  ran: int = 0        # passed, failed or an expected failure: the test checked something
  skipped: list[str] = field(default_factory=list)  # why, per skipped test
  verdicts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

_TALLY: dict[str, Tally] = defaultdict(Tally)

def pytest_runtest_logreport(report: pytest.TestReport) -> None:
  props = dict(report.user_properties)
  backend = props.get(_BACKEND)
  if backend is None: return
  tally = _TALLY[backend]
  if report.when == "setup": tally.selected += 1
  if report.skipped and not hasattr(report, "wasxfail"):
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    tally.skipped.append(reason.removeprefix("Skipped: "))
  elif report.when == "call": tally.ran += 1
  if _VERDICT in props and report.when == "call": tally.verdicts[props[_VERDICT]] += 1
  if report.failed: _CONFORMANCE.failed_tests.append({"backend": backend, "test": report.nodeid,
                                                      "message": _failure_message(report)})

def _checked_nothing(config: pytest.Config) -> list[str]:
  """Why the run checked nothing on a backend that must be checked: one named with --backend on which no test ran
  (all deselected or skipped), or, without --backend, a run whose backend tests all skipped."""
  named = bool(config.getoption("backend"))
  available = getattr(config, "_refimpl_selection", Selection([], {})).available
  out = []
  for name in (available if named else []):
    tally = _TALLY.get(name, Tally())
    if tally.ran: continue
    if not tally.selected: out.append(f"{name}: no test selected (--only / --skip / -k left none)")
    else: out.append(f"{name}: all {tally.selected} tests skipped, e.g. {tally.skipped[0]}")
  if not named and _TALLY and not any(t.ran for t in _TALLY.values()):
    out.append(f"every backend test skipped, e.g. {next(t.skipped[0] for t in _TALLY.values() if t.skipped)}")
  return out

def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
  workeroutput = getattr(session.config, "workeroutput", None)  # set in a pytest-xdist worker only
  if workeroutput is not None:
    workeroutput[_WORKER_KEY] = json.dumps(_CONFORMANCE.to_json())
    return
  if exitstatus not in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED, pytest.ExitCode.NO_TESTS_COLLECTED): return
  if hasattr(session.config, "_refimpl_selection") and _checked_nothing(session.config):
    session.exitstatus = 2

def pytest_report_collectionfinish(config: pytest.Config, start_path, items) -> list[str]:
  if not hasattr(config, "_refimpl_selection"): return []
  selection: Selection = config._refimpl_selection
  lines = [f"refimpl backends under test: {', '.join(selection.available) or 'none'}"]
  if config.getoption("baseline"): lines.append(f"refimpl baseline: {_CONFORMANCE.baseline} (only differences fail)")
  lines += [f"refimpl backend not tested: {reason}" for reason in selection.unavailable.values()]
  return lines

def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
  if "backend" in metafunc.fixturenames: metafunc.parametrize("backend", selection_of(metafunc.config).available)

@pytest.fixture(scope="session")
def conformance() -> Conformance: return _CONFORMANCE

def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
  if not hasattr(config, "_refimpl_selection") and not _CONFORMANCE.results: return  # not a refimpl suite run
  selection = selection_of(config)
  write = terminalreporter.write_line
  for name, reason in selection.unavailable.items(): write(f"refimpl: {name} not tested: {reason}")
  cells = _CONFORMANCE.cells()
  for backend in sorted({b for b, _ in cells}):
    statuses = [s for (b, _), (s, _) in cells.items() if b == backend]
    counts = ", ".join(f"{statuses.count(s)} {rh.LABELS[s]}" for s in STATUSES if s in STATUSES[:4] or statuses.count(s))
    write(f"refimpl conformance of {backend}: {len(statuses)} op cases: {counts}")
  counts = ", ".join(f"{b}: {n:,} lanes" for b, n in sorted(_CONFORMANCE.examples.items()))
  if counts: write(f"refimpl: op-level lanes checked against the spec: {counts}")
  for backend, tally in sorted(_TALLY.items()):
    untested = tally.verdicts.get("untested", 0)
    if untested: write(f"refimpl: {backend}: {untested} tests not tested (refimpl cannot export their programs)")
    if _CONFORMANCE.baseline is not None:
      differences, shared = tally.verdicts.get("difference", 0), tally.verdicts.get("baseline", 0)
      write(f"refimpl: {backend}: {differences} difference{'s' * (differences != 1)} from the baseline "
            f"{_CONFORMANCE.baseline} (failing tests it does not share); {shared} failing tests as on the baseline")
  for why in _checked_nothing(config): write(f"refimpl: ERROR, nothing checked: {why} (exit status 2)", red=True)
  path = config.getoption("conformance_report")
  if path:
    target = pathlib.Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    from refimpl.testing.provenance import provenance
    command = config.getoption("conformance_command") or " ".join(["python -m pytest", *config.invocation_params.args])
    _CONFORMANCE.provenance = provenance(command)
    _CONFORMANCE.not_tested = dict(selection.unavailable)
    _CONFORMANCE.profile = os.environ.get("REFIMPL_HYPOTHESIS_PROFILE", "ci")
    _CONFORMANCE.up = config.getoption("conformance_up")
    target.write_text(_CONFORMANCE.markdown())
    target.with_suffix(".html").write_text(_CONFORMANCE.html())
    target.with_suffix(".json").write_text(json.dumps(_CONFORMANCE.to_json(), indent=0, sort_keys=True) + "\n")
    write(f"refimpl: conformance report written to {target}, {target.with_suffix('.html')} and "
          f"{target.with_suffix('.json')}")
