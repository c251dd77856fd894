"""LOAD and STORE: every dtype's bits travel through memory unchanged, constants render exactly, and a false
gate does no access (a gated LOAD yields its alternative value). The executor's rule (SPEC.md "Decisions", row
"LOAD / STORE"; "Execution"); its emulator tests: spec_tests/test_emulator_memory.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import subprocess
import sys

import numpy as np
import pytest

from refimpl.conformance.rules.common import ALL, bl, i32
from refimpl.dtype import to_np
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder, dtype_to_str, save_program
from refimpl.testing.programs import assert_same, require, run, run_against_emulator
from refimpl.testing.values import edge_values, from_bits, to_bits


@pytest.mark.parametrize("dt", ALL, ids=dtype_to_str)
def test_every_supported_dtype_loads_and_stores_its_bits(backend, dt):
  require(backend, dt)
  x = from_bits(np.arange(256, dtype=np.uint64) * np.uint64(0x0101010101010101), dt) if dt != bl else np.arange(256) % 3 == 0
  b = ProgramBuilder("copy")
  out, inp = b.global_buf(dt, 256), b.global_buf(dt, 256)
  i = b.gidx(0, 256)
  b.store(out, i, b.load(inp, i))
  got = run(backend, b.build(), np.zeros(256, to_np(dt)), x)[0]
  assert (got == x).all() if dt == bl else (to_bits(got) == to_bits(x)).all()  # bits, signalling NaN payloads included

@pytest.mark.parametrize("dt", ALL, ids=dtype_to_str)
def test_constants_render_exactly(backend, dt):
  require(backend, dt)
  vals = edge_values(dt)
  b = ProgramBuilder("consts")
  out = b.global_buf(dt, len(vals))
  for k, v in enumerate(vals.tolist()): b.store(out, b.const(k, i32), b.const(v, dt))
  assert_same(run(backend, b.build(), np.zeros(len(vals), to_np(dt)))[0], vals, dt.name)  # -0.0, subnormals, MIN, MAX, inf

def test_gated_loads_and_stores_touch_only_gated_elements(backend):
  b = ProgramBuilder("gated")
  out, x, lim = b.global_buf(i32, 16), b.global_buf(i32, 16), b.var("lim", 0, 16)
  i = b.gidx(0, 16)
  v = b.load(x, i, gate=b.alu(Ops.CMPLT, i, lim), alt=b.const(-7, i32))
  b.store(out, i, b.alu(Ops.ADD, v, b.const(100, i32)), gate=b.alu(Ops.CMPNE, i, b.const(3, i32)))
  xs, init = np.arange(16, dtype=np.int32) * 10, np.full(16, -1, np.int32)
  got = run_against_emulator(backend, b.build(), [init, xs], vals=(9,))[0][0]
  assert got.tolist() == [-1 if k == 3 else (10 * k if k < 9 else -7) + 100 for k in range(16)]

def test_gated_loads_and_stores_with_a_false_gate_touch_no_memory(backend, tmp_path):
  """A false gate does no access: the index of a false-gated LOAD/STORE points 2^28 elements past the buffer (a segfault
  if touched), and the run happens in a child process so that a fault fails this test instead of the suite."""
  b = ProgramBuilder("gated_far")
  out, x, lim = b.global_buf(i32, 16), b.global_buf(i32, 16), b.var("lim", 0, 16)
  i = b.gidx(0, 16)
  gate = b.alu(Ops.CMPLT, i, lim)
  far = b.alu(Ops.WHERE, gate, i, b.alu(Ops.ADD, i, b.const(1 << 28, i32)))
  v = b.load(x, far, gate=gate, alt=b.const(-7, i32))
  b.store(out, far, b.alu(Ops.ADD, v, b.const(100, i32)), gate=gate)
  b.store(out, i, v, gate=b.alu(Ops.CMPLT, lim, b.alu(Ops.ADD, i, b.const(1, i32))))
  p = b.build()
  init, xs = np.full(16, -1, np.int32), np.arange(16, dtype=np.int32) * 10
  want = emulate(p, [init, xs], vals=(9,)).buffers[0]
  assert want.tolist() == [10 * k + 100 for k in range(9)] + [-7] * 7  # the rule, stated
  code = ("import sys, numpy as np\nfrom refimpl.ir import load_program\nfrom refimpl.runner import Kernel\n"
          "p = load_program(sys.argv[1])\n"
          "out = Kernel(p, sys.argv[2])(np.full(16, -1, np.int32), np.arange(16, dtype=np.int32) * 10, vals=(9,))[0]\n"
          "print(out.tolist())\n")
  save_program(p, tmp_path / "p.json")
  res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p.json"), backend], capture_output=True, timeout=300,
                       text=True)
  assert res.returncode == 0, f"exit status {res.returncode}: {res.stderr[-2000:]}"
  assert res.stdout.strip() == str(want.tolist())
