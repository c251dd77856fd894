"""SPEC.md is the current output of `python -m refimpl.spec`, and the spec's tables agree with the rules' behaviour."""
from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refimpl.dtype import dtypes, to_np
from refimpl.emulator import alu
from refimpl.ir.ops import GroupOp, Ops
from refimpl.spec import DECISIONS, OPS, VALUE_DTYPES, accepts, cast_kind, kind, render, ulp_bound, undefined_domains

ROOT = Path(__file__).resolve().parents[1]
REGENERATE = ".venv/bin/python -m refimpl.spec > SPEC.md"

def test_spec_md_is_current():
  text = (ROOT / "SPEC.md").read_text() if (ROOT / "SPEC.md").exists() else ""
  assert text == render(), f"SPEC.md is stale: regenerate it with `{REGENERATE}` at the repo root"

def test_module_main_prints_the_same_text():
  out = subprocess.run([sys.executable, "-m", "refimpl.spec"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
  assert out == render()

def test_spec_md_holds_every_rule_docstring_and_decision():
  text = render()
  for fn in set(alu.ALU_RULES.values()): assert inspect.getdoc(fn) in text, fn.__name__
  for d in DECISIONS: assert d.rule in text and d.rationale in text
  for op in OPS: assert f"| {op.name} |" in text

def test_each_decision_reason_is_written_once():
  """A decision's reason lives in its spec.DECISIONS row only: every op names the rows that decide it (SPEC.md's Ops
  table), and docs/semantics.md links to SPEC.md's Decisions instead of repeating a row's rule or rationale."""
  assert all(OPS[op].decisions for op in OPS)
  docs = (ROOT / "docs" / "semantics.md").read_text()
  assert "../SPEC.md#decisions" in docs
  assert [d.area for d in DECISIONS if d.rationale in docs or d.rule in docs] == []

def test_metadata_arity_matches_the_op_families():
  for op, s in OPS.items():
    want = 1 if op in GroupOp.Unary | {Ops.CAST, Ops.BITCAST} else 2 if op in GroupOp.Binary else 3
    assert s.arity == want, op

def test_undefined_domains_are_exactly_idiv_mod_shifts_and_float_to_int():
  with_ub = {(op, dt) for op in OPS for dt in VALUE_DTYPES if undefined_domains(op, dt)}
  want = {(op, dt) for op in (Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR) for dt in dtypes.ints}
  want |= {(Ops.CAST, dt) for dt in dtypes.floats}
  assert with_ub == want
  assert undefined_domains(Ops.IDIV, dtypes.uint8) == ("divisor 0: the result is undefined",)

@pytest.mark.parametrize("op", sorted(GroupOp.ALU, key=lambda o: o.value))
def test_kind_table_agrees_with_the_rules(op):
  """A dtype the table rejects raises ValueError in exec_alu; 'allowed' ops give two choices; tolerance ops have a
  bound; an op with no undefined domain never reports an undefined lane on random operands."""
  rng = np.random.default_rng(op.value)
  n = 3 if op in GroupOp.Ternary else 2 if op in GroupOp.Binary else 1
  for dt in VALUE_DTYPES:
    npdt = to_np(dt)
    cols = [rng.integers(0, 256, 64 * npdt.itemsize, dtype=np.uint8).view(npdt) for _ in range(n)]
    if op is Ops.WHERE: cols[0] = rng.integers(0, 2, cols[1].shape[0]).astype(bool)
    if dt is dtypes.bool: cols = [c.astype(bool) for c in cols]
    if not accepts(op, dt):
      with pytest.raises(ValueError): alu.exec_alu(op, dt, *cols)
      continue
    out = alu.exec_alu(op, dt, *cols)
    assert (ulp_bound(op, dt) is not None) == (kind(op, dt) == "tolerance")
    assert len(alu.allowed_results(op, dt, *cols)) == (2 if kind(op, dt) == "allowed" else 1)
    if not undefined_domains(op, dt): assert out.undefined is None, (op, dt)

def test_cast_kinds_hold_on_every_8bit_source():
  """'exact' casts keep every value of the source (cast back gives the same bits); 'round' ones lose some."""
  for src in (dtypes.int8, dtypes.uint8, dtypes.fp8e4m3, dtypes.fp8e5m2):
    x = np.arange(256, dtype=np.uint8).view(to_np(src))
    if dtypes.is_float(src): x = x[~np.isnan(x.astype(np.float32))]
    for dst in VALUE_DTYPES:
      k = cast_kind(src, dst)
      if k not in ("exact", "round"): continue
      there = alu.exec_cast(x, src, dst)
      if there.undefined is not None: continue
      back = alu.exec_cast(there.values, dst, src).values
      kept = bool((back.view(np.uint8) == x.view(np.uint8)).all())
      assert kept == (k == "exact"), (src, dst, k)
