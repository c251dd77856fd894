"""ALU rules the emulator binds once per program: those that are one numpy ufunc (alu.ufunc_rule; compute._ufunc_alu,
folds.fold_ufunc), those of IDIV, MOD, SHL and SHR by a constant that leaves them defined everywhere
(alu.constant_rule; compute._constant_alu), and the CASTs and BITCASTs that are one numpy function
(alu.conversion_rule; compute._convert). Each must be its op's rule, and running them directly must never show."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl import spec
from refimpl.dtype import dtypes
from refimpl.emulator import alu
from refimpl.emulator.plan import Plan
from refimpl.fuzz.generate import Profile, generate
from refimpl.ir import GroupOp, Ops
from refimpl.testing.programs import emulation_outcome
from refimpl.testing.values import edge_values, to_bits

ALU = [op for op in Ops if op in GroupOp.ALU]


@pytest.mark.parametrize("op", ALU, ids=lambda o: o.name)
def test_ufunc_rule_is_the_alu_rule(op):
  """alu.ufunc_rule(op, dt), where it names a ufunc, gives alu's rule for op (exec_alu) bit for bit (NaN payloads
  aside: the rules leave them open) on every edge value or pair of edge values, in both operand orders; the rule
  leaves no lane undefined, and its loose lanes are exactly its NaN results."""
  checked = 0
  for dt in spec.VALUE_DTYPES:
    fn = alu.ufunc_rule(op, dt)
    if fn is None: continue
    e = edge_values(dt)
    pairs = [(e,)] if fn.nin == 1 else [(np.repeat(e, len(e)), np.tile(e, len(e))), (np.tile(e, len(e)), np.repeat(e, len(e)))]
    for xs in pairs:
      rule = alu.exec_alu(op, dt, *xs)
      with np.errstate(all="ignore"): got = fn(*xs)
      assert rule.undefined is None and got.dtype == rule.values.dtype, f"{op.name} on {dt!r}"
      nan = np.isnan(rule.values) if rule.values.dtype.kind == "f" else np.zeros(len(got), bool)
      assert np.array_equal(np.isnan(got) if got.dtype.kind == "f" else np.zeros(len(got), bool), nan)
      assert np.array_equal(to_bits(got)[~nan], to_bits(rule.values)[~nan]), f"{op.name} on {dt!r}"
      assert np.array_equal(np.zeros(len(got), bool) if rule.loose is None else rule.loose, nan), f"{op.name} on {dt!r}"
      checked += 1
  if op in (Ops.ADD, Ops.MUL, Ops.CMPLT): assert checked, f"{op.name} should have a ufunc rule on some dtype"


@pytest.mark.parametrize("op", [Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR], ids=lambda o: o.name)
def test_constant_rule_is_the_alu_rule(op):
  """alu.constant_rule(op, dt, c), where it gives a function, is alu's rule for op with second operand c (exec_alu)
  bit for bit on every edge value of the first operand, and the rule leaves no lane undefined there; it gives one for
  every count in [0, bits) (shifts) and every divisor but 0 and signed -1 (IDIV, MOD) among the edge values."""
  for dt in spec.VALUE_DTYPES:
    if not dtypes.is_int(dt): continue
    e = edge_values(dt)
    for c in [int(x) for x in e] + list(range(8 * dt.itemsize)):
      fn = alu.constant_rule(op, dt, c)
      undefined_somewhere = alu.exec_alu(op, dt, e, np.full(len(e), c, e.dtype)).undefined is not None
      if op in (Ops.SHL, Ops.SHR): assert (fn is None) == (not 0 <= c < 8 * dt.itemsize), f"{op.name} {dt!r} by {c}"
      else: assert (fn is None) == (c == 0 or (c == -1 and dtypes.min(dt) < 0)), f"{op.name} {dt!r} by {c}"
      if fn is None: continue
      rule = alu.exec_alu(op, dt, e, np.full(len(e), c, e.dtype))
      assert not undefined_somewhere and np.array_equal(to_bits(fn(e)), to_bits(rule.values)), f"{op.name} {dt!r} by {c}"




@pytest.mark.parametrize("op", [Ops.CAST, Ops.BITCAST], ids=lambda o: o.name)
def test_conversion_rule_is_the_alu_rule(op):
  """alu.conversion_rule(op, src, dst), where it gives a function, is alu's rule for op (exec_cast / exec_bitcast) bit
  for bit (NaN payloads aside) on every edge value of src; the rule leaves no lane undefined there, and its loose lanes
  are exactly its NaN results (BITCAST: none). It gives one for the pairs tinygrad's kernels convert most."""
  given = set()
  for src in spec.VALUE_DTYPES:
    for dst in spec.VALUE_DTYPES:
      if op is Ops.BITCAST and (src.itemsize != dst.itemsize or dtypes.bool in (src, dst)): continue
      fn = alu.conversion_rule(op, src, dst)
      if fn is None: continue
      given.add((src, dst))
      e = edge_values(src)
      rule = alu.exec_cast(e, src, dst) if op is Ops.CAST else alu.exec_bitcast(e, src, dst)
      with np.errstate(all="ignore"): got = fn(e)
      assert rule.undefined is None and got.dtype == rule.values.dtype, f"{op.name} {src!r} -> {dst!r}"
      nan = np.isnan(rule.values) if rule.values.dtype.kind == "f" else np.zeros(len(got), bool)
      loose = np.zeros(len(got), bool) if rule.loose is None else rule.loose
      if op is Ops.BITCAST: assert not loose.any() and np.array_equal(to_bits(got), to_bits(rule.values))
      else: assert np.array_equal(to_bits(got)[~nan], to_bits(rule.values)[~nan]) and np.array_equal(loose, nan)
  common = {Ops.CAST: {(dtypes.int32, dtypes.float32), (dtypes.bool, dtypes.int32), (dtypes.float32, dtypes.bool)},
            Ops.BITCAST: {(dtypes.float32, dtypes.uint32), (dtypes.int32, dtypes.float32)}}
  assert common[op] <= given


@pytest.mark.parametrize("seed", [3, 4])
def test_rules_bound_per_program_match_the_rules(seed, monkeypatch):
  """Fuzzer programs (undefined behaviour, NaN and loose values left in): with the ufunc, constant and conversion rules
  run directly, the outputs, certainty levels, events and strict-mode report are those of every op run through alu's
  rules."""
  for index in range(30):
    g, arrays, vals = generate(seed, index, Profile(barrier=True))
    p = g.program(check=False)
    inputs = [arrays[id(buf)] for buf in g.globals()]
    for strict in (True, False):
      monkeypatch.setattr(alu, "ufunc_rule", ORIGINAL[0])
      monkeypatch.setattr(alu, "constant_rule", ORIGINAL[1])
      monkeypatch.setattr(alu, "conversion_rule", ORIGINAL[2])
      Plan._cache.clear()
      direct = emulation_outcome(p, inputs, vals, strict)
      monkeypatch.setattr(alu, "ufunc_rule", lambda op, dt: None)
      monkeypatch.setattr(alu, "constant_rule", lambda op, dt, c: None)
      monkeypatch.setattr(alu, "conversion_rule", lambda op, src, dst: None)
      Plan._cache.clear()
      assert direct == emulation_outcome(p, inputs, vals, strict), f"seed {seed} program {index} strict={strict}"
  Plan._cache.clear()


ORIGINAL = (alu.ufunc_rule, alu.constant_rule, alu.conversion_rule)


def test_malloc_tuning_is_opt_out():
  """refimpl.allocation: REFIMPL_MALLOC=default leaves the process's malloc alone (reuse_freed_memory says it did
  nothing), and emulation runs the same."""
  import os
  import subprocess
  import sys
  code = ("from refimpl.allocation import reuse_freed_memory; import numpy as np; "
          "from refimpl.ir import ProgramBuilder; from refimpl.dtype import dtypes; "
          "from refimpl.emulator.machine import emulate; b = ProgramBuilder('t'); "
          "o = b.global_buf(dtypes.int32, 1); b.store(o, b.const(0, dtypes.int32), b.const(7, dtypes.int32)); "
          "print(reuse_freed_memory(), emulate(b.build(), [np.zeros(1, np.int32)]).buffers[0][0])")
  out = subprocess.run([sys.executable, "-c", code], env={**os.environ, "REFIMPL_MALLOC": "default"}, capture_output=True,
                       text=True, check=True).stdout.split()
  assert out == ["False", "7"]


def test_decimal_reference_reduces_sin_with_the_digits_of_pi():
  """decimal_reference: SIN reduces its argument with pi to 370 digits (Machin's formula, evaluated when the module is
  imported). Its first 100 decimals are pi's, and sin(10^22) (10^22 is a float64; reducing it needs pi to about 40
  digits) is -0.85220084976718880177..., whose nearest float64 is -0.8522008497671888."""
  from refimpl.emulator.reference import _PI_LONG, decimal_reference
  pi_100 = "3.1415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679"
  assert str(_PI_LONG).startswith(pi_100) and len(str(_PI_LONG)) >= 370
  assert decimal_reference(Ops.SIN, 1e22) == -0.8522008497671888
  assert decimal_reference(Ops.SIN, 0.0) == 0.0
