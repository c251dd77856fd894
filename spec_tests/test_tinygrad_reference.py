"""tinygrad on the reference (refimpl.tinygrad.v0_10.reference and `python -m refimpl.tinygrad`). Rules:
- on the REFIMPL device a tinygrad program computes what tinygrad's own emulator computes, bit for bit, where both
  define the result (its kernels are the ones tinygrad's PYTHON device gets; the float constants here are exact);
- undefined behaviour stops the script with the tinygrad kernel's name, the uop and the lane;
- `capture` writes cases that the fuzzer's replay command reruns;
- the checking mode reports a disagreement exactly when tinygrad's device computed something the spec does not allow,
  and saves a reproducer."""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad import Tensor, nn

from refimpl.errors import UndefinedBehavior
from refimpl.fuzz.corpus import load_finding
from refimpl.ir import Ops
from refimpl.tinygrad.v0_10.reference import KernelUndefinedBehavior, install_reference_device

REF = install_reference_device()


def mlp_step(device: str) -> list[np.ndarray]:
  """One SGD step (lr 2^-6) of a 8-16-4 ReLU MLP on a mean squared error; the parameters after it and the loss."""
  rng = np.random.default_rng(0)
  shapes = [(16, 8), (16,), (4, 16), (4,)]
  params = [Tensor(rng.standard_normal(s).astype(np.float32), device=device, requires_grad=True) for s in shapes]
  x, y = (Tensor(rng.standard_normal(s).astype(np.float32), device=device) for s in ((4, 8), (4, 4)))
  opt = nn.optim.SGD(params, lr=2**-6)
  with Tensor.train():
    h = (x @ params[0].T + params[1]).relu()
    loss = ((h @ params[2].T + params[3] - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
  return [p.numpy() for p in params] + [loss.numpy()]


def cnn_forward(device: str) -> np.ndarray:
  """conv 3x3 (padding 1) + ReLU, 2x2 max pool, conv 3x3 + ReLU, a linear layer, on a 2x3x8x8 batch."""
  rng = np.random.default_rng(1)
  x, w1, b1, w2, fc = (Tensor(rng.standard_normal(s).astype(np.float32), device=device)
                       for s in ((2, 3, 8, 8), (4, 3, 3, 3), (4,), (4, 4, 3, 3), (16, 5)))
  h = x.conv2d(w1, b1, padding=1).relu().max_pool2d().conv2d(w2).relu()
  return (h.reshape(2, -1) @ fc).numpy()


def test_an_mlp_training_step_on_the_reference_is_tinygrads_emulator_bit_for_bit():
  for got, want in zip(mlp_step(REF), mlp_step("PYTHON")): assert got.tobytes() == want.tobytes()


def test_a_cnn_forward_on_the_reference_is_tinygrads_emulator_bit_for_bit():
  got, want = cnn_forward(REF), cnn_forward("PYTHON")
  assert got.shape == (2, 5) and got.tobytes() == want.tobytes()


def classifier_step(device: str) -> np.ndarray:
  """One SGD step (lr 2^-6) of a 64-128-10 ReLU MLP on a batch of 32 with cross-entropy: every parameter after it.
  tinygrad 0.10.1 updates the bias of the last layer with a GROUP reduction (r_10_16_2): each thread of a workgroup
  loads b[gidx], BARRIER, thread 0 stores b[gidx]."""
  rng = np.random.default_rng(0)
  shapes = [(128, 64), (128,), (10, 128), (10,)]
  params = [Tensor.empty(*s, device=device, requires_grad=True) for s in shapes]  # buffers of their own, as nn.Linear's
  for p, s in zip(params, shapes): p.assign(Tensor((rng.standard_normal(s) * 0.1).astype(np.float32), device=device)).realize()
  x = Tensor(rng.standard_normal((32, 64)).astype(np.float32), device=device)
  y = Tensor(rng.integers(0, 10, 32).astype(np.int32), device=device)
  opt = nn.optim.SGD(params, lr=2**-6)
  with Tensor.train():
    opt.zero_grad()
    ((x @ params[0].T + params[1]).relu() @ params[2].T + params[3]).sparse_categorical_crossentropy(y).backward()
    opt.step()
  return np.concatenate([p.numpy().ravel() for p in params])


def test_a_training_step_whose_barrier_orders_a_global_update_runs_on_the_reference():
  """Rule (BARRIER orders the workgroup's globals): the GROUP update of the bias is defined, so the step runs with no
  undefined behaviour and agrees with tinygrad's emulator (its EXP2/LOG2 are TOLERANCE ops: within float32 rounding)."""
  got, want = classifier_step(REF), classifier_step("PYTHON")
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)


def test_range_reductions_whose_overflowing_lanes_a_where_discards_run_on_the_reference():
  """Rule (deferred undefined values): tinygrad's sin and exp compute their range reductions on every lane, and a WHERE
  discards the lanes where a float->int CAST overflows; the CAST's value is undefined there but never used, so the
  program is defined. SIN of -0 is -0 and EXP2 of x >= emax + 1 is +inf (alu.transcendental's exact lanes), and
  tinygrad's CLANG gives the same bits."""
  from tinygrad import dtypes as tg_dtypes

  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  programs = {"half sin(-0.0)": lambda dev: Tensor([-0.0], dtype=tg_dtypes.half, device=dev).sin().numpy(),
              "float32 exp(1488522240.0)": lambda dev: Tensor([1488522240.0], device=dev).exp().numpy()}
  spec = {"half sin(-0.0)": np.array([-0.0], np.float16), "float32 exp(1488522240.0)": np.array([np.inf], np.float32)}
  clang = prepare_tinygrad()["CLANG"] is None
  for name, run in programs.items():
    got = run(REF)
    assert got.tobytes() == spec[name].tobytes(), (name, got)
    if clang: assert run("CLANG").tobytes() == got.tobytes(), name


def test_a_stored_out_of_range_cast_stops_the_reference_where_it_is_stored():
  """Rule (deferred undefined values, CAST_RANGE): float32 3e9 cast to int32 is an undefined value, and storing it is
  undefined behaviour at the STORE, which names the CAST (tinygrad's own test_float_midcast_int32 relies on this)."""
  from tinygrad import dtypes as tg_dtypes
  with pytest.raises(KernelUndefinedBehavior) as e: Tensor([3e9], device=REF).cast(tg_dtypes.int32).numpy()
  assert e.value.use == "stored" and e.value.origin.reason.startswith("float->int cast of 3000000000.0 outside")
  assert "(STORE)" in str(e.value) and "(CAST)" in str(e.value)


def test_a_kernel_launched_again_reuses_its_program_and_the_emulators_plan(monkeypatch):
  """The REFIMPL device makes one Program per distinct launch of a kernel, so the emulator's plan (machine.Plan: the
  verification and the index analysis) is made once, not at every launch: the second run of a training step emulates
  exactly the Program objects of the first. And the Program it runs is the renderer's translation itself (parsed
  once: no JSON form, no second verification): every kernel of the step runs the object from_tinygrad returned."""
  import refimpl.emulator.machine as machine
  import refimpl.tinygrad.v0_10.reference as reference
  translated: list = []  # what the renderer's from_tinygrad returned (kept alive: no id is reused)
  runs: list[list] = []  # the Program objects each run emulated
  translate, emulate = reference.from_tinygrad, machine.emulate
  def spy_translate(*args, **kwargs):
    translated.append(translate(*args, **kwargs))
    return translated[-1]
  def spy_emulate(program, *args, **kwargs):
    runs[-1].append(program)
    return emulate(program, *args, **kwargs)
  monkeypatch.setattr(reference, "from_tinygrad", spy_translate)
  monkeypatch.setattr(machine, "emulate", spy_emulate)
  x = np.arange(13 * 7, dtype=np.float32).reshape(13, 7)  # shapes no other test here uses: kernels rendered afresh
  for _ in range(2):
    runs.append([])
    mlp_step(REF)
    (Tensor(x, device=REF) * 3).sum(axis=1).numpy()
  first, second = runs
  assert first and len(second) == len(first) and all(a is b for a, b in zip(first, second))
  fresh = {p.name for p in translated}  # the sum's kernels (mlp_step's were rendered by the tests above)
  ran = [p for p in first if p.name in fresh]
  assert ran and all(any(p is t for t in translated) for p in ran), "a kernel ran a Program other than its translation"


def test_the_device_holds_its_session_and_its_kernels():
  """The REFIMPL device's session is the device's (no module-global session: `run` reads device_session()), and counts
  the device's runs; its renderer keys a kernel's translation in the device class's table, the same key for the same
  kernel, and its runtime refuses a binary it did not make (a key from another process)."""
  from tinygrad.device import Device

  import refimpl.tinygrad.session as session_module
  from refimpl.tinygrad.v0_10.reference import device_session
  assert not hasattr(session_module, "SESSION")
  session = device_session()
  assert session is type(Device[REF]).session
  runs = session.runs
  assert (Tensor(np.arange(11, dtype=np.float32), device=REF) * 5).numpy().tolist() == [5.0 * k for k in range(11)]
  assert session.runs == runs + 1 and any(k.startswith("E_11") for k in session.kernels)
  kernels = type(Device[REF]).kernels
  program = next(iter(kernels._keys))
  assert kernels.key(program) == kernels.key(dataclasses.replace(program))  # an equal Program, another object
  with pytest.raises(RuntimeError, match="not a kernel a REFIMPL device rendered in this process"):
    Device[REF].runtime("E_1", b"refimpl kernel 1.0: E_1")


def test_a_kernel_of_symbolic_shape_is_translated_at_each_launch():
  """importer rule 11 on the REFIMPL device: a SPECIAL sized by a Variable (tinygrad's symbolic shapes) takes each
  launch's size; the kernel runs for two values of the variable (tinygrad's test_tiny.test_symbolic)."""
  from tinygrad import Variable
  i = Variable("i", 1, 10)
  for n in (2, 5):
    assert (Tensor.ones(n, device=REF).contiguous().reshape(i.bind(n)) + 1).reshape(n).tolist() == [2.0] * n


def test_a_hand_built_kernel_with_unsized_pointers_runs_with_its_buffers_sizes():
  """importer rule 12 on the REFIMPL device: tinygrad's hand-built kernels (its test_uops) declare ptr() buffers with
  no size; each launch sizes them from the buffers it is given: out[0] = a[0] * b[0] in float32."""
  from tinygrad import dtypes as tg
  from tinygrad.codegen.linearize import linearize_uop
  from tinygrad.codegen.rewriter import full_graph_rewrite
  from tinygrad.device import Buffer, Device
  from tinygrad.engine.realize import CompiledRunner
  from tinygrad.ops import Ops as TgOps
  from tinygrad.ops import UOp as TgUOp
  from tinygrad.renderer import ProgramSpec
  bufs = [TgUOp(TgOps.DEFINE_GLOBAL, tg.float32.ptr(), (), k) for k in range(3)]
  zero = TgUOp(TgOps.CONST, tg.int32, (), 0)
  mul = TgUOp(TgOps.MUL, tg.float32, tuple(TgUOp(TgOps.LOAD, tg.float32, (b.index(zero),)) for b in bufs[1:]))
  renderer = Device[REF].renderer
  uops = linearize_uop(full_graph_rewrite(TgUOp.sink(TgUOp(TgOps.STORE, tg.void, (bufs[0].index(zero), mul))), opts=renderer))
  prg = CompiledRunner(ProgramSpec("test", renderer.render("test", uops), REF, uops=uops, global_size=[1, 1, 1],
                                   local_size=[1, 1, 1]))
  out = Buffer(REF, 1, tg.float32).allocate()
  ins = [Buffer(REF, 1, tg.float32).allocate().copyin(np.array([x], np.float32).data) for x in (1.5, -4.0)]
  prg.exec([out, *ins])
  got = np.empty(1, np.float32)
  out.copyout(got.data)
  assert got.tolist() == [-6.0]


def test_integer_division_by_zero_stops_with_the_kernel_the_uop_and_the_lane():
  """A stored quotient of a division by zero (DIVISOR_ZERO, deferred: undefined where it is used) stops at the STORE,
  naming the kernel, the IDIV that made the value (its operands) and the lane."""
  x = Tensor(np.arange(8, dtype=np.int32), device=REF)
  d = Tensor(np.array([1, 2, 0, 1, 1, 1, 1, 1], dtype=np.int32), device=REF)
  with pytest.raises(KernelUndefinedBehavior) as e: (x // d).numpy()
  err, origin = e.value, e.value.origin
  assert isinstance(err, UndefinedBehavior) and err.kernel.startswith("E_") and err.use == "stored"
  assert (origin.op, origin.reason, origin.operands) == (Ops.IDIV, "division by zero", (2, 0)) and err.uop_index is not None
  assert err.tensor_ops  # the Tensor ops tinygrad's metadata gives the kernel (which ones depends on its caches)
  assert f"tinygrad kernel {err.kernel} (Tensor ops: {', '.join(err.tensor_ops)}): undefined behavior at uop " \
         f"{err.uop_index} (STORE)" in str(err) and f"since uop {origin.uop_index} (IDIV)" in str(err)


def test_undefined_behaviour_saves_a_reproducer_where_the_session_says(tmp_path, monkeypatch):
  """With the device session's `save_undefined` set (selftest sets it), the kernel's inputs before the run are saved
  as a case the fuzzer replays, and the error names it."""
  from refimpl.tinygrad.v0_10.reference import device_session
  monkeypatch.setattr(device_session(), "save_undefined", tmp_path)
  x = Tensor(np.arange(6, dtype=np.int32), device=REF)
  with pytest.raises(KernelUndefinedBehavior) as e: (x // (x - 3)).numpy()
  files = sorted(tmp_path.glob("*.json"))
  assert len(files) == 1 and f"(reproducer: python -m refimpl.fuzz replay {files[0]})" in str(e.value)
  f = load_finding(files[0])
  assert f.found["device"] == "REFIMPL" and f.found["kernel"] == e.value.kernel and "division by zero" in f.detail


def test_integer_division_by_zero_that_a_where_discards_runs():
  """tinygrad's test_ops.py test_div_int: `(t > 0).where(1 // t, t)` divides by zero on the lanes it discards, which
  the spec defines (DIVISOR_ZERO is deferred: the WHERE drops the undefined quotient): alu.idiv_mod's 1 // t where
  t > 0 (1 // 1 = 1, 1 // 5 = 0), t elsewhere."""
  t = Tensor(np.array([0, 1, 5, -3, 0, -2**31], dtype=np.int32), device=REF)
  assert (t > 0).where(1 // t, t).numpy().tolist() == [0, 1, 0, -3, 0, -2**31]


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, timeout=600, cwd=cwd)


def _script(tmp_path: Path, body: str) -> Path:
  path = tmp_path / "script.py"
  path.write_text("import numpy as np\nfrom tinygrad import Tensor\n" + body)
  return path


def test_run_stops_a_script_at_undefined_behaviour_and_prints_the_summary(tmp_path):
  script = _script(tmp_path, "x = Tensor(np.arange(4, dtype=np.int32))\nprint((x // (x - 2)).numpy())\n")
  res = _cli("refimpl.tinygrad", "run", "--", str(script), cwd=tmp_path)
  assert res.returncode != 0 and "KernelUndefinedBehavior: tinygrad kernel E_" in res.stderr and "division by zero" in res.stderr
  assert "refimpl: 0 kernel runs of 0 kernels" in res.stderr and "1 with undefined behaviour" in res.stderr


def test_capture_writes_cases_the_replay_command_reruns(tmp_path):
  script = _script(tmp_path, "x = Tensor(np.arange(16, dtype=np.float32))\nprint(((x * 3).sum() + x.max()).numpy())\n")
  res = _cli("refimpl.tinygrad", "capture", "--device", "PYTHON", "--out", "cases", "--", str(script), cwd=tmp_path)
  assert res.returncode == 0, res.stderr
  files = sorted((tmp_path / "cases").glob("*.json"))
  assert files and f"{len(files)} saved" in res.stderr
  f = load_finding(files[0])
  assert f.found["device"] == "PYTHON" and f.found["kernel"] == files[0].stem and len(f.found["outputs"]) == len(f.case.inputs)
  # PYTHON: the case's own backend, the emulator alone; with another backend, the emulator is its reference
  for backends, shown in (("PYTHON", "PYTHON"), ("CLANG", "CLANG"), ("PYTHON,CLANG", "CLANG")):
    res = _cli("refimpl.fuzz", "replay", *map(str, files), "--backend", backends, cwd=tmp_path)
    want = sorted(f"{p} on {shown}: passes (agrees with the spec)" for p in files)
    assert res.returncode == 0 and sorted(res.stdout.splitlines()) == want, res.stdout + res.stderr


def test_the_check_reports_a_disagreement_exactly_when_tinygrads_clang_breaks_the_spec(tmp_path):
  """a*b+c in float32 with a product that is not exact: an FMA (clang contracts a*b+c unless told not to, and tinygrad
  passes no -ffp-contract flag) rounds once where the spec rounds twice. Whichever tinygrad's CLANG does here, the
  check must say so: one disagreement with a saved reproducer exactly when its result is not the spec's."""
  from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
  why = prepare_tinygrad()["CLANG"]
  if why is not None: pytest.skip(f"tinygrad's CLANG does not run here: {why}")
  a = np.float32(1 + 2**-12)
  body = (f"a = Tensor(np.full(4, {float(a)!r}, np.float32))\nc = Tensor(np.full(4, {-1.0 - 2**-11!r}, np.float32))\n"
          "out = (a * a + c).numpy()\nnp.save('out.npy', out)\n")
  res = _cli("refimpl.tinygrad", "run", "--check", "CLANG", "--out", "check", "--", str(_script(tmp_path, body)), cwd=tmp_path)
  spec = np.float32(np.float32(a * a) + np.float32(-1.0 - 2**-11))  # MUL rounds, then ADD rounds (no contraction)
  broke = np.load(tmp_path / "out.npy")[0] != spec
  reproducers = sorted((tmp_path / "check" / "disagreements").glob("*.json"))
  assert res.returncode == (1 if broke else 0) and len(reproducers) == int(broke), res.stderr
  assert f"{int(broke)} disagreements" in res.stderr
  for path in reproducers: assert json.loads(path.read_text())["found"]["device"] == "CLANG"
