"""The kernel as a whole: the self-check, the call signature (buffers, then vars), any identifier as its name,
and random programs of every op family against the emulator.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import dataclasses
import random

import numpy as np
import pytest

from refimpl.conformance.rules.common import i32
from refimpl.conformance.test_programs import vars_declared_first  # shared with the program tests
from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, elementwise
from refimpl.ir.strategies import RandomChooser, random_program
from refimpl.testing.programs import device_scalars, refused, run_against_emulator
from refimpl.testing.values import random_values


def test_selfcheck_reports_pass(backend):
  from refimpl.selfcheck import check_device
  assert check_device(backend) == ("PASS", "[1, 2, 3] * 2 = [2, 4, 6]")

def test_arguments_are_the_buffers_then_the_vars_whatever_the_declaration_order(backend):
  """The call signature is every buffer (DEFINE_GLOBAL number order), then every DEFINE_VAR, even when a DEFINE_VAR is
  declared first: out[r] = r + m for r < n."""
  got = run_against_emulator(backend, vars_declared_first(), [np.zeros(8, np.int32)], vals=(5, 40))[0][0]
  assert got.tolist() == [40, 41, 42, 43, 44, 0, 0, 0]

NAMES = ["mad", "sin", "max", "dot", "for", "int", "kernel", "half", "barrier", "get_global_id", "main", "rf_u32", "data0"]

@pytest.mark.parametrize("name", NAMES)
def test_any_identifier_the_verifier_accepts_names_a_kernel(backend, name):
  """Rule (program-name): the name is any C identifier, and the program runs under it on every backend (names like
  OpenCL built-ins, C keywords or refimpl's own helpers included)."""
  p = dataclasses.replace(elementwise(Ops.MUL, i32, n=8), name=name)
  x = np.arange(8, dtype=np.int32)
  assert run_against_emulator(backend, p, [np.zeros(8, np.int32), x, x])[0][0].tolist() == (x * x).tolist()

def test_random_programs_match_the_emulator(backend):
  """refimpl.ir.strategies' random programs (every op family, casts, bitcasts, vectors, gated and vector memory, loops,
  IF blocks, grids, locals) on edge-biased inputs; programs where the emulator finds undefined behaviour are skipped,
  and elements the emulator marks loose (NaN payloads, allowed sets) are not compared."""
  compared = 0
  for seed in range(480):  # 120 seeds, more while fewer than 30 ran (a device with few dtypes declines more of them)
    if seed >= 120 and compared >= 30: break
    p = random_program(RandomChooser(random.Random(seed)), steps=20, scalars=device_scalars(backend))
    if not all(Device[backend].supports_dtype(dt) for dt in {u.dtype.base.scalar() for u in p.uops} - {dtypes.void}): continue
    rng = np.random.default_rng(seed)
    bufs = [random_values(ptr.base, ptr.size, rng) for _, ptr in sorted(p.buffers.items())]
    vals = [int(rng.integers(lo, hi + 1)) for _, lo, hi in p.vars]
    if emulate(p, bufs, vals, strict=False).events or refused(backend, p): continue
    run_against_emulator(backend, p, bufs, vals, strict=False)
    compared += 1
  assert compared >= 30  # enough programs are free of undefined behaviour to mean something
