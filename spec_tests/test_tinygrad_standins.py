"""tinygrad 0.10.1's devices without their hardware (refimpl.tinygrad.v0_10.standins): QCOM and DSP run on stand-ins and are
held to the spec like TINYGRAD:CLANG and :GPU (spec_tests/test_tinygrad_backends.py); NV and CUDA compile with NVRTC;
AMD and METAL render. Every expected value is the spec's (refimpl's emulator); what tinygrad gets wrong at each level
is a strict xfail or an exact set of failing cases, so a tinygrad that fixes one turns the test red. A device whose
stand-in is missing here (no PoCL, no qemu-hexagon, no NVRTC wheel) does not open and says what to install; only its
tests that need it to run skip, naming why."""
from __future__ import annotations

import inspect
import types
from pathlib import Path

import numpy as np
import pytest

from refimpl.device import Device, DeviceUnavailable
from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.ir import Ops, ProgramBuilder, elementwise
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value
from refimpl.testing.differential import OpCase, OpHarness, supported, sweep_inputs

pytest.importorskip("tinygrad")
from test_tinygrad_backends import _add_plain, _sum_loop  # the control programs CLANG and GPU run too

from refimpl.tinygrad.report.classes import CLASS_BY_ID, run_reproducer
from refimpl.tinygrad.v0_10 import standins

F32 = dtypes.float32
RAN = [f"TINYGRAD:{n}" for n, s in standins.STANDINS.items() if s.level == "ran"]


def _need(device: str) -> None:
  why = Device.open_error(device)
  if why is not None: pytest.skip(f"{device} does not open here: {why}")


# ***** the table *****

def test_every_seed_device_of_tinygrad_is_judged_natively_or_by_a_stand_in():
  """tinygrad 0.10.1's device list is the report's native backends (their runtimes run here) plus the table's."""
  from tinygrad.device import ALL_DEVICES

  from refimpl.tinygrad.report.runner import NATIVE
  assert set(ALL_DEVICES) == set(NATIVE) | set(standins.STANDINS) and not set(NATIVE) & set(standins.STANDINS)
  from tinygrad.renderer import Renderer
  for name, s in standins.STANDINS.items():
    assert s.level in standins.LEVELS and s.standin and s.hardware and s.install
    cls = _load(s.renderer)
    assert issubclass(cls, Renderer) and cls.device == name, (name, cls)


def _load(spec: str) -> type:
  from refimpl.device import load_object
  return load_object(spec)


@pytest.mark.parametrize("name", list(standins.STANDINS))
def test_each_device_opens_at_its_tables_level_or_says_what_to_install(name):
  """Here there is no Adreno, Hexagon, NVIDIA, AMD or Apple hardware: the device opens as its stand-in, at the level the
  table gives, or does not open, naming what its stand-in needs."""
  device = f"TINYGRAD:{name}"
  why = Device.open_error(device)
  if why is not None:
    assert device in why and standins.STANDINS[name].install in why, why
    return
  dev = Device[device]
  assert dev.standin is standins.STANDINS[name] and dev.level == standins.STANDINS[name].level


def test_a_stand_in_that_cannot_be_built_says_why_and_what_to_install(monkeypatch):
  def broken(s): raise OSError("libOpenCL.so: cannot open shared object file")
  monkeypatch.setitem(standins.BUILDERS, "QCOM", broken)
  with pytest.raises(DeviceUnavailable) as e: standins.open_standin("QCOM", "no /dev/kgsl-3d0")
  text = str(e.value)
  assert "no /dev/kgsl-3d0" in text and "libOpenCL.so" in text and standins.STANDINS["QCOM"].install in text


# ***** QCOM and DSP: ran on their stand-ins, held to the spec *****

def _div_i32():
  """int32 IDIV truncates towards zero (on the DSP a call to __hexagon_divsi3)."""
  b = ProgramBuilder("div_i32")
  out, x, y = (b.global_buf(dtypes.int32, 4) for _ in range(3))
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.IDIV, b.load(x, i), b.load(y, i)))
  return b.build(), [np.zeros(4, np.int32), np.array([7, -7, 2**31 - 1, -2**31], np.int32), np.array([2, 2, -1, 3], np.int32)]


REPORTED = ("contraction-mul-add-f32", "reassociation-add-f32", "max-nan-f32", "sub-negative-constant-does-not-compile",
            "cmplt-nan-f32", "shift-i32-does-not-compile", "neg-unsigned-does-not-compile")
PROGRAMS = {**{c: CLASS_BY_ID[c].reproducer for c in REPORTED}, "control-add-f32": _add_plain,
            "control-sum-loop-i32": _sum_loop, "control-idiv-i32": _div_i32}
# what tinygrad 0.10.1 gets wrong on each (its OpenCL C on PoCL; its DSP C on qemu-hexagon), as on CLANG and GPU
KNOWN_BAD = {
  "contraction-mul-add-f32": "a*b+c inlined into one expression: OpenCL C and clang (no -ffp-contract=off) fuse an FMA",
  "reassociation-add-f32": "the C-style renderer strips the parens of a nested ADD",
  "max-nan-f32": "MAX rendered (a<b)?b:a drops a NaN in b",
  "sub-negative-constant-does-not-compile": "x - (-1.5) rendered (x--1.5f): `--` does not compile",
}


def _params():
  for device in RAN:
    for case in PROGRAMS:
      marks = [pytest.mark.xfail(strict=True, reason=KNOWN_BAD[case])] if case in KNOWN_BAD else []
      yield pytest.param(device, case, marks=marks, id=f"{device}-{case}")


@pytest.mark.parametrize("device,case", list(_params()))
def test_program_matches_the_spec(device, case):
  _need(device)
  program, inputs = PROGRAMS[case]()
  want = emulate(program, inputs).buffers
  got = Kernel(program, device)(*[a.copy() for a in inputs])
  for k, (g, w) in enumerate(zip(got, want)):
    assert same_value(g, w).all(), f"{device} {case}: buffer {k}: got {g!r}, the spec gives {w!r}"


OP_CASES = {"MAX-f32": OpCase(Ops.MAX, F32), "ADD-f32": OpCase(Ops.ADD, F32), "MUL-f32": OpCase(Ops.MUL, F32),
            "IDIV-i32": OpCase(Ops.IDIV, dtypes.int32), "CMPLT-f32": OpCase(Ops.CMPLT, F32),
            "CAST-f32-to-i32": OpCase(Ops.CAST, F32, dtypes.int32), "SQRT-f32": OpCase(Ops.SQRT, F32)}
KNOWN_BAD_OPS = {"MAX-f32": KNOWN_BAD["max-nan-f32"]}
# half on the DSP (QCOM's half kernels depend on the PoCL: one without cl_khr_fp16 does not compile them, as on GPU)
DSP_OP_CASES = {"CAST-i16-to-f16": OpCase(Ops.CAST, dtypes.int16, dtypes.float16),
                "CAST-f16-to-bool": OpCase(Ops.CAST, dtypes.float16, dtypes.bool),
                "CAST-f16-to-f32": OpCase(Ops.CAST, dtypes.float16, F32)}
KNOWN_BAD_DSP = {"CAST-i16-to-f16": "int16 -> half gives the integer's bits (1 -> 0x0001) in the Hexagon build",
                 "CAST-f16-to-bool": "Hexagon's LLVM backend cannot select the setcc of a half compared with 0"}


def _op_params():
  for device in RAN:
    cases = {**OP_CASES, **(DSP_OP_CASES if device == "TINYGRAD:DSP" else {})}
    for c in cases:
      why = KNOWN_BAD_OPS.get(c) or (KNOWN_BAD_DSP.get(c) if device == "TINYGRAD:DSP" else None)
      marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
      yield pytest.param(device, c, marks=marks, id=f"{device}-{c}")


@pytest.mark.parametrize("device,case_id", list(_op_params()))
def test_op_sweep(device, case_id):
  """The op suite's own sweep (edge values and pairs, then random values; undefined lanes never sent), 4096 lanes."""
  _need(device)
  case = {**OP_CASES, **DSP_OP_CASES}[case_id]
  h = OpHarness(device, case, lanes=1 << 12)
  inputs = [x[: 1 << 12] for x in sweep_inputs(case, lanes=1 << 12)]
  verdict = h.check(inputs)
  assert verdict.ok, h.failure_report(inputs, verdict)


def test_the_dsps_own_form_compiles_for_hexagon():
  """tinygrad's real DSP source (DSPRenderer: the kernel and its FastRPC `entry`) links as DSPDevice links it (-shared,
  symbols left to the DSP) into a Hexagon ELF (e_machine 164); the flags are tinygrad's own."""
  from tinygrad.runtime.ops_dsp import DSPDevice, DSPRenderer

  from refimpl.backends import ops_clang
  from refimpl.lower import lower_for
  from refimpl.tinygrad.v0_10.backend import Tinygrad10Renderer
  from refimpl.tinygrad.v0_10.exporter import to_tinygrad
  source = inspect.getsource(DSPDevice.__init__) + inspect.getsource(importlib_dsp().ClangCompiler.compile)
  for flag in standins.HEXAGON_FLAGS: assert flag in ("-x", "c") or f"'{flag}'" in source or f'"{flag}"' in source, flag
  zig = ops_clang._ziglang_command()
  if zig is None: pytest.skip("no ziglang here (pip install 'refimpl[clang]')")
  r = DSPRenderer()
  for program in (elementwise(Ops.ADD, F32, n=64), elementwise(Ops.EXP2, F32, n=64), elementwise(Ops.IDIV, dtypes.int32, n=8)):
    lowered = lower_for(program, Tinygrad10Renderer.of("TINYGRAD:DSP", r, {}))
    src = r.render("k", to_tinygrad(lowered, r))
    assert "int entry(unsigned long long handle" in src
    elf, log = standins.hexagon(zig, src, standins.HEXAGON_DSP_FLAGS)
    assert elf is not None, log
    assert elf[:4] == b"\x7fELF" and int.from_bytes(elf[18:20], "little") == 164


def _tree(root, contents: dict[str, bytes]) -> dict[str, tuple[int, str]]:
  """Writes `contents` ({path: bytes}) under root; their entries as standins.intact_copy reads them (RECORD's spelling)."""
  for rel, data in contents.items():
    (root / rel).parent.mkdir(parents=True, exist_ok=True)
    (root / rel).write_bytes(data)
  return {rel: (len(data), standins.record_digest(data)) for rel, data in contents.items()}

def test_a_stable_copy_is_made_once_outlives_its_source_and_is_made_again_when_damaged(tmp_path):
  """Rule (standins.stable_copy, which keeps the ziglang package where a reinstall leaves it): the copy is made once
  and then reused as it is; it outlives the removal of its source; a copy missing a file, or with one whose content
  differs, is removed and made again from the source; a source that differs from its listed files gives no copy."""
  assert standins.record_digest(b"") == "47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU"  # RECORD's spelling of sha256("")
  contents = {"a.txt": b"alpha", "d/b.zig": b"const b = 1;\n"}
  src, target = tmp_path / "src", tmp_path / "cache" / "zig-lib" / "v-1"
  files = _tree(src, contents)
  assert standins.stable_copy(src, files, target) == target
  mark = target / "made-before"  # a file no copy of src holds: it stays while the copy is reused, goes when remade
  mark.touch()
  assert standins.stable_copy(src, files, target) == target and mark.exists()  # reused, not remade
  for damage in (lambda p: p.unlink(), lambda p: (p.unlink(), p.write_bytes(b"const b = 2;\n"))):
    damage(target / "d" / "b.zig")  # replaced, not written through: a hard link would carry the edit to the source
    assert standins.stable_copy(src, files, target) == target and not mark.exists()
    assert {rel: (target / rel).read_bytes() for rel in contents} == contents
    mark.touch()
  moved = tmp_path / "src-removed"
  src.rename(moved)  # a reinstall removes the source's files: the copy stays whole
  assert standins.stable_copy(src, files, target) == target and mark.exists()
  (moved / "a.txt").unlink()
  (moved / "a.txt").write_bytes(b"other")
  assert standins.stable_copy(moved, files, tmp_path / "cache" / "zig-lib" / "v-2") is None

def test_hexagon_runs_the_installed_zig_from_its_copy_under_refimpls_cache_root(tmp_path, monkeypatch):
  """Rule (standins.hexagon): the installed ziglang's `zig cc` runs from stable_ziglang(), a copy (stable_copy) of its
  package folder, every file its RECORD lists, under refimpl's cache root (where zig's build of musl outlives a
  reinstall); any other zig command runs as given."""
  from refimpl.backends import ops_clang
  installed = ops_clang._ziglang_command()
  if installed is None: pytest.skip("no ziglang here (pip install 'refimpl[clang]')")
  monkeypatch.setenv("REFIMPL_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(standins, "stable_ziglang", standins.stable_ziglang.__wrapped__)
  copies = []
  monkeypatch.setattr(standins, "stable_copy", lambda source, files, target: copies.append((source, files)) or target)
  ran = []
  monkeypatch.setattr(standins.subprocess, "run", lambda cmd, **kw: ran.append(cmd) or
                      types.SimpleNamespace(returncode=1, stderr="not run"))
  assert standins.hexagon(installed, "int x;", ()) == (None, "not run")
  if not copies: pytest.skip("the ziglang here lists no files (no wheel RECORD)")
  (source, files), zig = copies[-1], Path(ran[-1][0])
  assert zig.parent.parent == tmp_path / "ziglang" and zig.name == "zig" and ran[-1][1] == "cc"
  assert {"zig", "lib/std/std.zig"} <= set(files) and (source / "zig").is_file()
  assert len(installed) != 2 or Path(installed[0]) == source / "zig"
  standins.hexagon(["/elsewhere/zig", "cc"], "int x;", ())
  assert ran[-1][:2] == ["/elsewhere/zig", "cc"]


def importlib_dsp():
  import importlib
  return importlib.import_module("tinygrad.runtime.ops_dsp")


# ***** NV, CUDA (compiled), AMD, METAL (rendered) *****

def _expected_render_failures(device: str, names: tuple[str, ...]) -> set[str]:
  """The FDIV cases of `names` the device supports: tinygrad 0.10.1's CUDA, AMD and Metal renderers have no FDIV."""
  return {f"FDIV-{n}" for n in names if supported(device, OpCase(Ops.FDIV, _dtype(n)))}


def _dtype(short: str):
  from refimpl import spec
  return next(d for d in spec.VALUE_DTYPES if spec.short_name(d) == short)


BUILD_LEVEL = {"NV": ("f16", "bf16", "f32", "f64"), "AMD": ("f16", "bf16", "f32", "f64"), "METAL": ("f16", "f32")}


@pytest.mark.parametrize("name", list(BUILD_LEVEL))
def test_every_op_case_reaches_the_devices_level_but_fdiv(name):
  """Every op case the device supports renders (AMD, METAL) or renders and compiles with NVRTC (NV), except FDIV:
  tinygrad's renderer has no FDIV (KeyError, a render error). Exactly those fail."""
  device = f"TINYGRAD:{name}"
  _need(device)
  results = standins.judge_builds(device)
  failed = {c for c, (status, _) in results.items() if status == "fail"}
  assert failed == _expected_render_failures(device, BUILD_LEVEL[name]), {c: results[c][1][:300] for c in failed}
  assert all("KeyError: <Ops.FDIV" in results[c][1] for c in failed)
  assert sum(status == "pass" for status, _ in results.values()) > 250


def test_nv_compiles_to_a_cubin_and_cuda_to_ptx_and_nothing_runs():
  """NV's binary is NVRTC's cubin (an ELF), CUDA's its PTX for sm_80; a launch raises NotRunHere, never a value."""
  for name, check in (("NV", lambda lib: lib[:4] == b"\x7fELF"), ("CUDA", lambda lib: b".target sm_80" in lib)):
    device = f"TINYGRAD:{name}"
    _need(device)
    program, inputs = _add_plain()
    kernel = Kernel(program, device)
    assert check(kernel.lib), kernel.lib[:200]
    with pytest.raises(standins.NotRunHere, match="not run"): kernel(*[a.copy() for a in inputs])


@pytest.mark.parametrize("name", ["NV", "AMD", "METAL"])
def test_replay_reproduces_a_render_or_compile_finding_and_runs_no_value_class(name):
  """replay(class, TINYGRAD:<NAME>) on a device below ran: the `x--1.5f` kernel fails to compile (NV: NVRTC's `--`
  error) or renders (AMD, METAL: nothing compiles it, so not run), and a value class is "not run", never a verdict."""
  device = f"TINYGRAD:{name}"
  _need(device)
  bad, detail = run_reproducer(CLASS_BY_ID["sub-negative-constant-does-not-compile"], device)
  if name == "NV": assert bad is True and "CompileError" in detail and "--" in detail, detail
  else: assert bad is None and "not run" in detail, detail
  bad, detail = run_reproducer(CLASS_BY_ID["max-nan-f32"], device)
  assert bad is None and "not run" in detail


@pytest.mark.parametrize("device", RAN)
def test_a_full_sweep_of_65536_lanes_matches_the_spec(device):
  """The suite's own launch size (256 KiB buffers): on DSP every buffer crosses qemu-hexagon whole (tinygrad's mock
  reads each with one read(), which a pipe would cut at 64 KiB: the stand-in hands it files)."""
  _need(device)
  case = OpCase(Ops.ADD, F32)
  h = OpHarness(device, case)
  inputs = sweep_inputs(case)
  verdict = h.check(inputs)
  assert verdict.checked == 1 << 16 and verdict.ok, h.failure_report(inputs, verdict)


@pytest.mark.parametrize("device", RAN)
def test_replay_reproduces_the_classes_the_report_gives_them(device):
  """replay(class, device) on QCOM and DSP: the four classes they share with CLANG and GPU break the rule there, and
  the classes of other renderers (LLVM's CMPLT, WGSL's casts) keep it."""
  _need(device)
  for c in CLASS_BY_ID.values():
    bad, detail = run_reproducer(c, device)
    assert bad is (c.id in KNOWN_BAD), (c.id, detail)
