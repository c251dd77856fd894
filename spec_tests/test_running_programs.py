"""Running programs through the device contract: the runner's argument checks, eval_op on every device, the PYTHON
device, and the self-check (`python -m refimpl.selfcheck`, `python -m refimpl.device`)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from refimpl import UndefinedBehavior
from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.ir import Ops, ProgramBuilder, elementwise
from refimpl.runner import Kernel, run_program
from refimpl.testing import eval_op


def scaled_sum_program():
  """out[0] = sum of x[i] * k for i < n (a DEFINE_VAR bounded to [0, 8]) over an int32 buffer of 8."""
  b = ProgramBuilder("scaled_sum")
  out, x = b.global_buf(dtypes.int32, 1), b.global_buf(dtypes.int32, 8)
  n, k = b.var("n", 0, 8), b.var("k", -100, 100)
  acc = b.acc(b.const(0, dtypes.int32))
  with b.loop_uops(b.const(0, dtypes.int32), n) as i: b.assign(acc, b.alu(Ops.ADD, acc, b.alu(Ops.MUL, b.load(x, i), k)))
  b.store(out, b.const(0, dtypes.int32), acc)
  return b.build()

# *** the runner ***

def test_run_program_passes_buffers_in_order_and_vars_by_position():
  out, _ = run_program(scaled_sum_program(), np.zeros(1, np.int32), np.arange(8, dtype=np.int32), vals=(4, 3), device="PYTHON")
  assert out.tolist() == [(0 + 1 + 2 + 3) * 3]

@pytest.mark.parametrize("arrays,vals,error", [
  ((np.zeros(1, np.int32),), (4, 3), "takes 2 buffers, got 1"),
  ((np.zeros(1, np.int32), np.zeros(8, np.float32)), (4, 3), "buffer 1 holds dtypes.int"),
  ((np.zeros(1, np.int32), np.zeros(9, np.int32)), (4, 3), "buffer 1 holds 8 elements, got an array of 9"),
  ((np.zeros(1, np.int32), np.zeros(8, np.int32)), (4,), r"takes 2 int vars \['n', 'k'\], got 1"),
  ((np.zeros(1, np.int32), np.zeros(8, np.int32)), (9, 3), r"var n=9 is outside its declared range \[0, 8\]"),
])
def test_run_program_rejects_bad_arguments_with_a_clear_error(arrays, vals, error):
  with pytest.raises((TypeError, ValueError), match=error): run_program(scaled_sum_program(), *arrays, vals=vals, device="PYTHON")

def test_a_kernel_compiles_once_and_runs_many_times():
  kernel = Kernel(elementwise(Ops.MUL, dtypes.float32, n=4), "PYTHON")
  for scale in (1.0, 2.0, -0.5):
    out = kernel(np.zeros(4, np.float32), np.arange(4, dtype=np.float32), np.full(4, scale, np.float32))[0]
    assert out.tolist() == [i * scale for i in range(4)]

# *** eval_op ***

def test_eval_op_applies_the_int_wraparound_rule():
  # docs/semantics.md, "Integer arithmetic wraps": int ADD wraps in two's complement, so 127 + 1 in int8 is -128
  assert eval_op(Ops.ADD, np.array([127, -128], np.int8), np.array([1, -1], np.int8)).tolist() == [-128, 127]

def test_eval_op_broadcasts_and_keeps_the_input_shape():
  out = eval_op(Ops.MUL, np.arange(6, dtype=np.int32).reshape(2, 3), np.int32(2))
  assert out.shape == (2, 3) and out.tolist() == [[0, 2, 4], [6, 8, 10]]

def test_eval_op_casts_to_the_requested_dtype():
  # docs/semantics.md, "Casts": CAST float -> int truncates toward zero
  assert eval_op(Ops.CAST, np.array([-2.75, 2.75], np.float32), dtype=dtypes.int32).tolist() == [-2, 2]

def test_eval_op_on_python_raises_undefined_behavior_with_the_lane_and_operands():
  with pytest.raises(UndefinedBehavior) as info: eval_op(Ops.IDIV, np.array([7, 8, 9], np.int32), np.array([1, 0, 0], np.int32))
  assert info.value.op is Ops.IDIV and info.value.uop_index is None and info.value.operands == (8, 0)
  assert "division by zero" in info.value.reason and info.value.count == 2

def test_eval_op_checks_undefined_inputs_before_native_code_runs(monkeypatch):
  native = [d for d in ("CLANG", "LLVM", "GPU") if Device.open_error(d) is None]
  if not native: pytest.skip("no native backend opens here")
  name = native[0]
  ran = []
  monkeypatch.setattr(Kernel, "__call__", lambda self, *a, **k: ran.append(1))
  with pytest.raises(UndefinedBehavior, match="division by zero"):
    eval_op(Ops.IDIV, np.array([1], np.int32), np.array([0], np.int32), device=name)
  with pytest.raises(UndefinedBehavior, match="INT_MIN"):
    eval_op(Ops.MOD, np.array([-(2**31)], np.int32), np.array([-1], np.int32), device=name)
  assert ran == []

def test_a_native_integer_division_by_zero_never_kills_the_caller():
  code = ("import numpy as np; from refimpl.testing import eval_op; from refimpl.ir import Ops\n"
          "from refimpl import UndefinedBehavior\n"
          "try: eval_op(Ops.IDIV, np.array([1], np.int32), np.array([0], np.int32), device='CLANG')\n"
          "except UndefinedBehavior as e: print('caught', e.reason)")
  if Device.open_error("CLANG") is not None: pytest.skip(Device.open_error("CLANG"))
  result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
  assert result.returncode == 0 and result.stdout.startswith("caught division by zero"), result.stderr

def test_eval_op_takes_op_names_and_numpy_dtypes():
  """`eval_op("ADD", ...)` is `eval_op(Ops.ADD, ...)`; a numpy dtype names the CAST target as a refimpl dtype does."""
  x = np.array([1, 2, 3], np.int32)
  assert eval_op("ADD", x, x).tolist() == eval_op("add", x, x).tolist() == eval_op(Ops.ADD, x, x).tolist() == [2, 4, 6]
  assert eval_op("CAST", x, dtype=np.float16).dtype == np.float16 and eval_op(Ops.CAST, x, dtype="int8").tolist() == [1, 2, 3]

@pytest.mark.parametrize("call,error", [
  (lambda: eval_op(Ops.ADD, np.array([1], np.int32)), "ADD takes 2 operands, got 1"),
  (lambda: eval_op(Ops.ADD, np.array([1], np.int32), np.array([1.0], np.float32)), "ADD needs operands of one dtype"),
  (lambda: eval_op(Ops.CAST, np.array([1], np.int32)), "CAST needs the target dtype"),
  (lambda: eval_op(Ops.STORE, np.array([1], np.int32)), "evaluates one ALU op, CAST or BITCAST .*STORE is none of them"),
  (lambda: eval_op("ADDX", np.array([1], np.int32)), "'ADDX' is not an op; eval_op takes one of ADD, AND, BITCAST"),
  (lambda: eval_op(3, np.array([1], np.int32)), "op must be an Ops member or its name"),
  (lambda: eval_op("CAST", np.array([1], np.int32), dtype="U4"), "dtype must be a refimpl dtype"),
])
def test_eval_op_rejects_misuse_clearly(call, error):
  with pytest.raises((TypeError, ValueError), match=error): call()

# *** the PYTHON device and the self-check ***

def test_python_device_runs_grid_programs_with_workgroups():
  program = elementwise(Ops.SUB, dtypes.int16, n=8, local_size=4)
  out = run_program(program, np.zeros(8, np.int16), np.arange(8, dtype=np.int16), np.ones(8, np.int16), device="PYTHON")[0]
  assert out.tolist() == list(range(-1, 7))

def test_python_device_raises_undefined_behavior_through_the_device_contract():
  program = elementwise(Ops.SHL, dtypes.int32, n=2)
  with pytest.raises(UndefinedBehavior, match="shift count"):
    run_program(program, np.zeros(2, np.int32), np.ones(2, np.int32), np.array([1, 32], np.int32), device="PYTHON")

@pytest.mark.parametrize("module", ["refimpl.selfcheck", "refimpl.device"])
def test_python_m_selfcheck_prints_every_device_and_passes_the_emulator(module):
  """Rule: the self-check runs from its own entry point, `python -m refimpl.selfcheck`, and from the documented
  `python -m refimpl.device`, which hands over to it."""
  result = subprocess.run([sys.executable, "-m", module], capture_output=True, text=True)
  lines = result.stdout.splitlines()
  rows = {line[2:].split()[0]: line for line in lines if line[:1] in ("*", " ") and len(line) > 2}
  assert {"CLANG", "LLVM", "GPU", "PYTHON"} <= set(rows), result.stdout
  assert all(row[2:].split()[1] in ("PASS", "FAIL", "UNAVAILABLE", "NOT") for row in rows.values()), result.stdout
  assert rows["PYTHON"][2:].split()[1] == "PASS" and sum(line.startswith("*") for line in lines) == 1
  failures = [name for name, row in rows.items() if row[2:].split()[1] == "FAIL"]
  assert result.returncode == (1 if failures else 0), result.stdout


# *** whole programs against the emulator (refimpl.testing.programs) ***

def test_program_comparison_holds_nan_results_to_a_nan():
  """Rule: run_against_emulator compares every element the emulator pins to one value (certainty EXACT or NAN_PAYLOAD):
  MAX with a NaN operand is a NaN (any NaN), so a correct CLANG passes with every element compared and a CLANG whose
  MAX drops a NaN first operand (refimpl.fuzz.planted.NanMaxClang) is caught."""
  if Device.open_error("CLANG") is not None: pytest.skip(f"CLANG: {Device.open_error('CLANG')}")
  from refimpl.testing.programs import check_against_emulator
  p = elementwise(Ops.MAX, dtypes.float32, 4)
  inputs = [np.zeros(4, np.float32), np.array([np.nan, 1.0, np.nan, 2.0], np.float32), np.full(4, 1.5, np.float32)]
  assert check_against_emulator("CLANG", p, inputs) == 12  # the two NaN results too
  Device.register("NANMAXCLANG_PROGRAMS", "refimpl.fuzz.planted:NanMaxClang")
  with pytest.raises(AssertionError, match=r"buffer 0 element 0: emulator \S*nan\S*, .*\(2 elements differ\)"):
    check_against_emulator("NANMAXCLANG_PROGRAMS", p, inputs)
