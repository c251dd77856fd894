"""Every ALU op and every CAST against the emulator's semantics, many ops to a kernel: edge-biased random
inputs, every 8-bit pair, every edge-value pair and 16-bit input, every CAST from each dtype, hypothesis
examples. Each op's own rule: the module of its family (refimpl.conformance.rules).

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.conformance.rules.common import ALL, FLOATS, bl, f16, f32, i32, u64
from refimpl.device import Device
from refimpl.dtype import dtypes, to_np
from refimpl.emulator.alu import exec_cast
from refimpl.ir import GroupOp, Ops, dtype_to_str
from refimpl.runner import Kernel
from refimpl.testing.differential import OpCase, local_size_for
from refimpl.testing.programs import (
  assert_allowed,
  assert_same,
  check_ops,
  defined_inputs,
  exact_ops,
  ops_arrays,
  ops_kernel,
  require,
  run,
)
from refimpl.testing.values import array_strategy, edge_values, from_bits, random_values


@pytest.mark.parametrize("dt", [bl, *dtypes.ints, *FLOATS], ids=dtype_to_str)
def test_every_alu_op_matches_the_emulator(backend, dt):
  """Every exact and allowed-set ALU op on dt in one kernel, edge-biased random inputs (a third edge values); each result
  is an allowed result (exact ops bit for bit, MAX/MULACC from their allowed sets; EXP2/LOG2/SIN have their own test)."""
  require(backend, dt)
  n, rng = 1024, np.random.default_rng(dt.priority * 31 + dt.itemsize)
  ops = exact_ops(dt)
  inputs = {op: defined_inputs(op, dt, [random_values(d, n, rng) for d in OpCase(op, dt).input_dtypes]) for op in ops}
  check_ops(backend, dt, ops, inputs, n)

@pytest.mark.parametrize("dt", [bl, dtypes.int8, dtypes.uint8], ids=dtype_to_str)
def test_every_8bit_input_pair_matches_the_emulator(backend, dt):
  """Exhaustive: every binary op over all 2^16 operand pairs (ternary ops: every pair, the third operand random)."""
  vals = np.array([False, True]) if dt == bl else from_bits(np.arange(256), dt)
  x, y = np.repeat(vals, len(vals)), np.tile(vals, len(vals))
  z = np.random.default_rng(1).permutation(x)
  inputs = {}
  for op in exact_ops(dt):
    xs = [y] if op in GroupOp.Unary else [x, y] if op in GroupOp.Binary else [x.astype(np.bool_) if op is Ops.WHERE else x, y, z]
    inputs[op] = defined_inputs(op, dt, xs)
  check_ops(backend, dt, exact_ops(dt), inputs, len(x))

@pytest.mark.parametrize("dt", [t for t in (*dtypes.ints, *FLOATS) if t.itemsize > 1], ids=dtype_to_str)
def test_every_edge_value_pair_and_every_16bit_input_match_the_emulator(backend, dt):
  """Binary and ternary ops over every pair of edge values (ternary: the third operand random); unary ops over every
  input of a 16-bit dtype (NEG; SQRT and RECIP on floats), edge and random values of wider ones."""
  require(backend, dt)
  edges = edge_values(dt)
  n = max(1 << 17 if dt.itemsize == 2 else 0, len(edges) ** 2)
  rng = np.random.default_rng(dt.itemsize + dt.priority)
  fill = random_values(dt, n - len(edges) ** 2, rng)
  x = np.concatenate([np.repeat(edges, len(edges)), fill])
  y = np.concatenate([np.tile(edges, len(edges)), rng.permutation(fill)])
  every = np.resize(from_bits(np.arange(1 << 16), dt), n) if dt.itemsize == 2 else x
  inputs = {}
  for op in exact_ops(dt):
    if op in GroupOp.Unary: xs = [every]
    elif op in GroupOp.Binary: xs = [x, y]
    else: xs = [rng.integers(0, 2, n).astype(np.bool_) if op is Ops.WHERE else rng.permutation(x), x, y]
    inputs[op] = defined_inputs(op, dt, xs)
  check_ops(backend, dt, exact_ops(dt), inputs, n)

@pytest.mark.parametrize("src", ALL, ids=dtype_to_str)
def test_every_cast_from_a_dtype_matches_the_emulator(backend, src):
  """CAST from src to every dtype the device supports, in one kernel: every bit pattern of an 8/16-bit src, else
  edge-biased random values. Lanes the spec leaves undefined for a target (float -> int of NaN, inf, out of range) are
  replaced by 0."""
  require(backend, src)
  bits = 8 * src.itemsize
  if src == bl: x = np.arange(512) % 3 == 0
  elif bits <= 16: x = from_bits(np.arange(1 << bits), src)
  else: x = random_values(src, 4096, np.random.default_rng(bits + src.priority))
  targets = [d for d in ALL if Device[backend].supports_dtype(d)]
  arrays, wants = [], []
  for d in targets:
    out = exec_cast(x, src, d)
    xd = x if out.undefined is None else np.where(out.undefined, np.zeros(1, x.dtype), x)
    arrays += [np.zeros(len(x), to_np(d)), xd]
    wants.append(exec_cast(xd, src, d).values)
  p = ops_kernel(f"casts_{src.name.replace(' ', '_')}", [OpCase(Ops.CAST, src, d) for d in targets], len(x),
                 local_size=local_size_for(backend, len(x)))
  got = run(backend, p, *arrays)
  for d, g, w in zip(targets, got[0::2], wants): assert_same(g, w, f"CAST {src.name} -> {d.name}")

HYPOTHESIS_N = 8

@functools.cache
def _all_ops_kernel(backend: str, dt) -> Kernel:
  """One compiled kernel of every exact op on dt over HYPOTHESIS_N lanes, for all the hypothesis examples of a backend."""
  return Kernel(ops_kernel(f"hyp_{dt.name.replace(' ', '_')}", [OpCase(op, dt) for op in exact_ops(dt)], HYPOTHESIS_N), backend)

@pytest.mark.parametrize("dt", [f16, f32, i32, u64], ids=dtype_to_str)
@settings(max_examples=60)
@given(data=st.data())
def test_hypothesis_edge_biased_inputs_match_the_emulator(backend, dt, data):
  """Hypothesis (edge-biased values, shrinking to one lane): every exact/allowed-set op on dt, one kernel."""
  require(backend, dt)
  ops = exact_ops(dt)
  count = sum(len(OpCase(op, dt).input_dtypes) for op in ops)
  it = iter(np.split(data.draw(array_strategy(dt, HYPOTHESIS_N * count)), count))
  inputs = {}
  for op in ops:
    xs = [next(it) for _ in OpCase(op, dt).input_dtypes]
    if op is Ops.WHERE: xs[0] = xs[0] != 0
    inputs[op] = defined_inputs(op, dt, xs)
  assert_allowed(_all_ops_kernel(backend, dt)(*ops_arrays(dt, ops, inputs, HYPOTHESIS_N)), dt, ops, inputs, backend)
