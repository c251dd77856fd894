"""Each rule has one home, named after it. spec_tests/semantics/test_<family>.py holds a rule family's emulator tests and
declares at its top what it is the home of:

  RULES      the rule functions of refimpl/emulator/alu.py (alu.ALU_RULES values) whose home it is
  DECISIONS  the rows of refimpl.spec.DECISIONS (SPEC.md "Decisions") it holds: row area -> the test stating the row
  ALSO       (optional) rule functions whose home is another file, part of which this family tests (arith on floats...)

Rules checked here: every alu rule function and every decision row the ALU rules own has exactly one home; the rows of
the executor (LOAD / STORE, races, uninitialised: no alu function in their "where") are tested in EXECUTOR_HOMES; each
claimed rule function has a test in its file, each claimed row names a test of its file; the module docstring names
the file's rules (alu.<name>) and rows ("<area>") and only files that exist; a file claiming nothing is one of
CROSS_CUTTING. The backend tests of a family are refimpl/conformance/rules/test_<family>.py (same name), or one of
the program-level families in BACKEND_ONLY.
"""
import collections
import importlib
import inspect
import pathlib
import re

import numpy as np
import pytest

from refimpl import spec
from refimpl.conformance import rules as backend_rules
from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.emulator.certainty import Certainty
from refimpl.fuzz import expect, kinds, variants
from refimpl.ir.ops import GroupOp, Ops
from refimpl.spec import ARITH_FLOATS, accepts

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEMANTICS = ROOT / "spec_tests" / "semantics"
FILES = sorted(SEMANTICS.glob("test_*.py"))
CROSS_CUTTING = {"test_interface.py": "exec_alu / exec_cast / exec_bitcast / allowed_results around every rule",
                 "test_int_sweeps.py": "every int binary op in one sweep (edge grids, hypothesis)",
                 "test_oracle.py": "the exact oracles (refimpl.testing.oracle) the families' expected values come from"}
EXECUTOR_HOMES = {"LOAD / STORE": ("test_emulator_memory.py", "out_of_bounds"),
                  "races": ("test_emulator_memory.py", "race"),
                  "BARRIER": ("test_emulator_memory.py", "barrier_orders"),
                  "uninitialised": ("test_emulator_memory.py", "uninitialised"),
                  "deferred undefined values": ("test_emulator_deferred.py", "deferred"),
                  "moves a compiler introduces": ("test_emulator_deferred.py", "move")}  # row -> (file, word in a test)
BACKEND_ONLY = {"test_memory.py", "test_loops.py", "test_vectors.py", "test_grid.py", "test_kernels.py", "test_every_op.py"}
CONVERSIONS = {alu.cast: "exec_cast", alu.bitcast: "exec_bitcast"}
ROWS = [d.area for d in spec.DECISIONS]

def module(path: pathlib.Path):
  return importlib.import_module(f"semantics.{path.stem}")

def defined_tests(mod) -> dict:
  return {n: f for n, f in vars(mod).items() if n.startswith("test_") and inspect.isfunction(f) and f.__module__ == mod.__name__}

def claims(attr: str) -> list[tuple[str, object]]:
  return [(path.name, item) for path in FILES for item in getattr(module(path), attr, ())]

def test_the_families_exist():
  assert len(FILES) >= 15 and (SEMANTICS / "__init__.py").exists()
  assert not list((ROOT / "spec_tests").glob("test_semantics_*.py")), "the rule tests live in spec_tests/semantics/"

@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_every_file_declares_its_claims(path):
  mod = module(path)
  rules, decisions, also = mod.RULES, mod.DECISIONS, getattr(mod, "ALSO", ())
  assert isinstance(rules, tuple) and isinstance(also, tuple) and isinstance(decisions, dict)
  assert all(fn in alu.ALU_RULES.values() for fn in (*rules, *also)), "RULES and ALSO name functions of alu.ALU_RULES"
  assert all(row in ROWS for row in decisions), f"not a row of spec.DECISIONS: {set(decisions) - set(ROWS)}"
  assert not set(rules) & set(also)
  if not rules and not decisions: assert path.name in CROSS_CUTTING, "a file that claims nothing must be CROSS_CUTTING"
  else: assert path.name not in CROSS_CUTTING

def test_every_alu_rule_function_has_exactly_one_home():
  homes = collections.defaultdict(list)
  for name, fn in claims("RULES"): homes[fn.__name__].append(name)
  want = {fn.__name__ for fn in alu.ALU_RULES.values()}
  assert set(homes) == want, f"without a home: {want - set(homes)}"
  assert {fn: files for fn, files in homes.items() if len(files) != 1} == {}

def test_every_decision_row_has_exactly_one_home():
  homes = collections.defaultdict(list)
  for name, row in claims("DECISIONS"): homes[row].append(name)
  for row, (file, _) in EXECUTOR_HOMES.items(): homes[row].append(file)
  assert set(homes) == set(ROWS), f"without a home: {set(ROWS) - set(homes)}"
  assert {row: files for row, files in homes.items() if len(files) != 1} == {}
  executor = {d.area for d in spec.DECISIONS if "alu." not in d.where}
  assert executor == set(EXECUTOR_HOMES), "the rows no alu rule implements are the executor's"

@pytest.mark.parametrize("row", sorted(EXECUTOR_HOMES))
def test_executor_rows_are_tested_in_their_home(row):
  file, word = EXECUTOR_HOMES[row]
  text = (ROOT / "spec_tests" / file).read_text()
  assert re.search(rf"^def test_\w*{word}\w*\(", text, re.M), f"{file} has no test of {row!r}"

def test_also_names_rules_homed_elsewhere():
  homes = {fn: name for name, fn in claims("RULES")}
  for name, fn in claims("ALSO"): assert homes[fn] != name, (name, fn.__name__)

@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_each_named_rule_has_a_test_in_its_file(path):
  """Each claimed decision row names a test of the file; each claimed rule function is exercised by a test whose source
  (decorators included) names one of its ops, or calls its exec_* entry (CAST, BITCAST)."""
  mod = module(path)
  tests = defined_tests(mod)
  assert tests, f"{path.name} has no test"
  for row, test in mod.DECISIONS.items(): assert test in tests, f"{row!r}: {test} is not a test of {path.name}"
  sources = [inspect.getsource(fn) for fn in tests.values()]
  for fn in mod.RULES:
    words = [f"Ops.{op.name}" for op, rule in alu.ALU_RULES.items() if rule is fn and op not in (Ops.CAST, Ops.BITCAST)]
    words += [CONVERSIONS[fn]] if fn in CONVERSIONS else []
    assert any(w in s for w in words for s in sources), f"no test of {path.name} exercises alu.{fn.__name__}"

@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_the_docstring_names_the_rule_and_its_spec_md_row(path):
  """The module docstring names each rule function (alu.<name>), its SPEC.md "Rules" section (`<name>`) and each
  decision row ("<area>"), and every file it points to exists (the family's backend tests among them)."""
  mod = module(path)
  doc = mod.__doc__ or ""
  for fn in (*mod.RULES, *getattr(mod, "ALSO", ())): assert f"alu.{fn.__name__}" in doc, fn.__name__
  for fn in mod.RULES: assert f"`{fn.__name__}`" in doc, f"SPEC.md's Rules section `{fn.__name__}`"
  for row in mod.DECISIONS: assert f'"{row}"' in doc, row
  for ref in re.findall(r"(?:refimpl|spec_tests)/[\w/]+\.py", doc): assert (ROOT / ref).exists(), ref
  for ref in re.findall(r"(?<![/\w])test_\w+\.py", doc): assert (SEMANTICS / ref).exists(), ref

def test_backend_rule_files_are_named_after_the_families():
  """refimpl/conformance/rules/test_<family>.py: the backend tests of the family of spec_tests/semantics of that name, or a
  program-level family (BACKEND_ONLY: memory, loops, vectors, grid, the kernel as a whole, the all-ops sweeps)."""
  names = {m.__name__.rsplit(".", 1)[1] + ".py" for m in backend_rules.modules()}
  assert names >= BACKEND_ONLY
  assert {n for n in names - BACKEND_ONLY if not (SEMANTICS / n).exists()} == set()

# ***** looseness: declared on its rule (alu's `@loose`) and read from there *****

LOOSE_OPS = [op for op in alu.ALU_RULES if alu.looseness(op) is not None]
LOOSENESS_READERS = (spec.kind, kinds._transfer, variants._varied, expect._largest_bound)  # each would restate it

@pytest.mark.parametrize("op", sorted(GroupOp.ALU, key=lambda o: o.value), ids=lambda op: op.name)
def test_every_loose_rule_is_declared_by_its_decorator(op):
  """A rule whose Outcomes hold TOLERANCE or ALLOWED_SET lanes declares that level with `@loose`, and a declared rule
  gives such lanes (on edge and random float operands of every float dtype it takes)."""
  declared = alu.looseness(op)
  seen = set()
  edges = [0.0, -0.0, 1.0, -1.5, 0.3, np.inf, np.nan, 1e4]
  for dt in ARITH_FLOATS:
    if not accepts(op, dt): continue
    n = spec.OPS[op].arity
    cols = [np.resize(np.repeat(edges, len(edges) ** k), len(edges) ** n) for k in range(n)]
    if op is Ops.WHERE: cols[0] = cols[0] > 0
    xs = [c if c.dtype == bool else c.astype(to_np(dt)) for c in cols]
    levels = alu.exec_alu(op, dt, *xs).certainty
    if levels is not None: seen |= {Certainty(int(c)) for c in np.unique(levels)}
  seen -= {Certainty.EXACT, Certainty.NAN_PAYLOAD, Certainty.UNDEFINED}
  assert seen == (set() if declared is None else {declared.level}), op

def test_looseness_is_stated_only_by_the_declaration():
  """alu's rules give their loose lanes the level they declare (no `Certainty.TOLERANCE` / `ALLOWED_SET` outside an
  `@loose(...)` line), and spec.kind and the fuzzer's kinds and runs name no loose op: they read the declaration."""
  levels = ("Certainty.TOLERANCE", "Certainty.ALLOWED_SET")
  stray = [line for line in inspect.getsource(alu).splitlines() if any(w in line for w in levels)]
  assert all(line.startswith("@loose(") for line in stray), stray
  names = [f"Ops.{op.name}" for op in LOOSE_OPS] + ["GroupOp.Transcendental"]
  for fn in LOOSENESS_READERS: assert [n for n in names if n in inspect.getsource(fn)] == [], fn.__name__
  assert set(LOOSE_OPS) == {op for op in spec.OPS if spec.kind(op, dtypes.float32) in ("tolerance", "allowed")}
