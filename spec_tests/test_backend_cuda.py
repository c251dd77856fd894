"""The CUDA device (refimpl/backends/cuda.py, ops_cuda.py) and tinygrad's CUDA and PTX toolchains (refimpl.tinygrad.v0_10.nvidia)
where there is no GPU: every kernel the conformance suite launches is rendered and compiled by NVIDIA's compilers from
the PyPI wheels; the rendering rules are checked in the source and in NVRTC's PTX. The launch tests need an NVIDIA GPU
and driver and skip with the reason where there is none (bench/gpu_check.py runs the whole suite on one).

The kernels are recorded by one test: the packaged conformance suite runs on RECORDING (refimpl.testing.recording: the
emulator, which writes down every program it is given), in a subprocess, with the `dev` hypothesis profile and a fixed
hypothesis seed (the programs are the same kernels with fewer inputs; the set is the same from run to run)."""
from __future__ import annotations

import ctypes
import functools
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refimpl.backends.cuda import ALL_SCALARS, CUDARenderer
from refimpl.device import ALL_DEVICES, Device
from refimpl.dtype import PtrDType, dtypes, to_np
from refimpl.emulator.machine import emulate
from refimpl.errors import CompileError
from refimpl.ir import Ops, Program, ProgramBuilder, ProgramError
from refimpl.lower import lower_for
from refimpl.testing.programs import check_against_emulator
from refimpl.testing.recording import ENV, recorded

ops_cuda = pytest.importorskip("refimpl.backends.ops_cuda")
try: ops_cuda.nvrtc_dir()
except CompileError as e: pytest.skip(str(e), allow_module_level=True)

F32 = dtypes.float32


def _record_conformance_programs(where: Path) -> list[Program]:
  """Every distinct program the packaged conformance suite launches: the suite on RECORDING in a subprocess."""
  path = where / "conformance-programs.jsonl"
  env = {**os.environ, ENV: str(path), "REFIMPL_HYPOTHESIS_PROFILE": "dev"}
  cmd = [sys.executable, "-m", "pytest", "--pyargs", "refimpl.conformance", "-q", "-p", "no:cacheprovider", "-p",
         "no:xdist", "--hypothesis-seed=0", "--backend", "refimpl.testing.recording:RecordingDevice"]
  done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=where)
  assert done.returncode == 0, f"the conformance suite failed on RECORDING:\n{done.stdout[-4000:]}\n{done.stderr[-2000:]}"
  return list(recorded(path))


def _cuda_compiles(programs: list[Program]) -> None:
  """CUDA takes every program (every dtype, local sizes up to 1024 threads), and each one's CUDA C compiles with NVRTC
  and FLAGS, 200 kernels per translation unit (unique kernel names; the prelude is include-guarded)."""
  r = CUDARenderer()
  srcs = [r.render(f"{p.name}_{k}", lower_for(p, r)) for k, p in enumerate(programs)]
  dts = {u.dtype.base if isinstance(u.dtype, PtrDType) else u.dtype.scalar() for p in programs for u in p.uops}
  assert dts >= ALL_SCALARS, f"the recording lacks {sorted(d.name for d in ALL_SCALARS - dts)}"
  compiler = ops_cuda.NVRTCCompiler()
  compiler.cachekey = None  # NVRTC compiles every one, here and now (not the disk cache)
  for start in range(0, len(srcs), 200):
    for cubin in compiler.compile_batch(srcs[start:start + 200]): assert cubin[:4] == b"\x7fELF"


def test_every_conformance_kernel_compiles_for_cuda_and_for_tinygrads_cuda_and_ptx(tmp_path):
  """Every kernel the conformance suite launches compiles for CUDA (NVRTC) and, where tinygrad 0.10.1 has a form for
  it, with tinygrad's CUDA and PTX toolchains (_tinygrad_compiles; those parts need tinygrad, in the dev extra). One
  test, so that one xdist worker records the suite once; every part runs and the failures are reported together."""
  programs = _record_conformance_programs(tmp_path)
  parts = {"CUDA": _cuda_compiles}
  if importlib.util.find_spec("tinygrad") is not None:
    parts |= {f"TINYGRAD:{kind}": functools.partial(_tinygrad_compiles, kind) for kind in ("CUDA", "PTX")}
  failures = []
  for name, check in parts.items():
    try: check(programs)
    except (AssertionError, CompileError) as e: failures.append(f"{name}: {e}")
  assert not failures, "\n\n".join(failures)


# ***** the rendering rules, in the source and in NVRTC's PTX *****

def _ptx(program: Program) -> str:
  """NVRTC's PTX of the program as CUDA renders it, with FLAGS and a compute_XX architecture."""
  r = CUDARenderer()
  ptx, log = ops_cuda.nvrtc().compile(r.render(program.name, lower_for(program, r)), ("--gpu-architecture=compute_80",
                                                                                        *ops_cuda.FLAGS), output="PTX")
  assert ptx is not None, log
  return ptx.decode()

def _binary(op: Ops, dt=F32, unary: bool = False) -> Program:
  b = ProgramBuilder(f"rule_{op.name.lower()}")
  out, x, y = (b.global_buf(dt, 4) for _ in range(3))
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(op, b.load(x, i)) if unary else b.alu(op, b.load(x, i), b.load(y, i)))
  return b.build()

def test_mul_then_add_is_not_contracted_into_an_fma():
  """SPEC.md arith: MUL and ADD round once each (no contraction): with --fmad=false the PTX multiplies and adds with
  explicit rounding (mul.rn / add.rn, which ptxas never fuses) and has no fma."""
  b = ProgramBuilder("rule_mul_add")
  out, x, y, z = (b.global_buf(F32, 4) for _ in range(4))
  i = b.gidx(0, 4)
  b.store(out, i, b.alu(Ops.ADD, b.alu(Ops.MUL, b.load(x, i), b.load(y, i)), b.load(z, i)))
  ptx = _ptx(b.build())
  assert "mul.rn.f32" in ptx and "add.rn.f32" in ptx and "fma" not in ptx
  assert "--fmad=false" in ops_cuda.FLAGS

@pytest.mark.parametrize("op,want", [(Ops.FDIV, "div.rn.f32"), (Ops.SQRT, "sqrt.rn.f32"), (Ops.RECIP, "rcp.rn.f32")])
def test_float32_division_sqrt_and_reciprocal_are_correctly_rounded(op, want):
  """SPEC.md arith: FDIV, SQRT and RECIP are correctly rounded: the PTX uses the IEEE round-to-nearest instruction,
  not div.approx / sqrt.approx / rcp.approx, and nothing flushes subnormals (.ftz)."""
  ptx = _ptx(_binary(op, unary=op is not Ops.FDIV))
  assert want in ptx and ".approx" not in ptx and ".ftz" not in ptx

def test_barrier_is_syncthreads_and_locals_are_shared():
  """SPEC.md BARRIER: a workgroup barrier that orders its locals and globals: __syncthreads(); DEFINE_LOCAL is one
  __shared__ array per block; the grid is blockIdx / threadIdx."""
  b = ProgramBuilder("rule_barrier")
  out = b.global_buf(F32, 8)
  tmp = b.local_buf(F32, 4)
  g, t = b.gidx(0, 2), b.lidx(1, 4)
  b.store(tmp, t, b.cast(t, F32))
  b.barrier()
  other = b.load(tmp, b.alu(Ops.XOR, t, b.const(1, dtypes.int32)))
  b.store(out, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(4, dtypes.int32)), t), other)
  r = CUDARenderer()
  src = r.render("rule_barrier", lower_for(b.build(), r))
  assert "__syncthreads();" in src and "__shared__ float local_" in src
  assert "(int)blockIdx.x" in src and "(int)threadIdx.y" in src and 'extern "C" __global__ void k_rule_barrier(' in src

def test_bitcasts_move_bits_without_pointer_punning():
  """SPEC.md BITCAST: the bits unchanged; rendered with CUDA's bit-move intrinsics, never through a pointer cast
  (aliasing UB in C++)."""
  b = ProgramBuilder("rule_bitcast")
  out, x = b.global_buf(dtypes.uint32, 4), b.global_buf(F32, 4)
  out64, y = b.global_buf(dtypes.float64, 4), b.global_buf(dtypes.int64, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.bitcast(b.load(x, i), dtypes.uint32))
  b.store(out64, i, b.bitcast(b.load(y, i), dtypes.float64))
  r = CUDARenderer()
  src = r.render("rule_bitcast", lower_for(b.build(), r))
  assert "rf_fbits(" in src and "rf_bitsd(" in src and "*(" not in src and "__float_as_uint" in src

def test_int_to_float_conversions_round_to_nearest_even_explicitly():
  """SPEC.md casts: int -> float is one round-to-nearest-even rounding: spelled as CUDA's _rn intrinsics."""
  r = CUDARenderer()
  assert r.cast("x", dtypes.int64, F32) == "__ll2float_rn(x)"
  assert r.cast("x", dtypes.uint64, dtypes.float64) == "__ull2double_rn(x)"
  assert r.cast("x", dtypes.int8, F32) == "__int2float_rn((int)x)"
  assert r.cast("x", dtypes.float64, F32) == "__double2float_rn(x)"

def test_blocks_beyond_cuda_limits_are_refused_as_capabilities():
  """A block of more than 1024 threads, or more than 48 KiB of __shared__ memory, is beyond CUDA: ProgramError
  (capability), which the suite reports as unsupported, never a compile or launch error."""
  b = ProgramBuilder("too_wide")
  out = b.global_buf(F32, 2048)
  b.store(out, b.lidx(0, 2048), b.const(1.0, F32))
  with pytest.raises(ProgramError, match="1024"): lower_for(b.build(), CUDARenderer())
  b = ProgramBuilder("too_much_shared")
  out, tmp = b.global_buf(F32, 1), b.local_buf(F32, 16384)
  b.store(tmp, b.lidx(0, 1), b.const(1.0, F32))
  b.store(out, b.const(0, dtypes.int32), b.load(tmp, b.const(0, dtypes.int32)))
  with pytest.raises(ProgramError, match="shared"): lower_for(b.build(), CUDARenderer())

def test_a_source_nvrtc_rejects_is_a_compile_error_with_the_log_and_source():
  with pytest.raises(CompileError, match=r"(?s)NVRTC .*error.*--- source ---.*1 \| this is not CUDA"):
    ops_cuda.NVRTCCompiler().compile("this is not CUDA")


# ***** opening and launching *****

def _driver_present() -> bool:
  try: ctypes.CDLL("libcuda.so.1")
  except OSError: return False
  return True

@pytest.mark.skipif(_driver_present(), reason="an NVIDIA driver is installed here")
def test_without_a_driver_cuda_is_unavailable_with_the_reason():
  assert Device.open_error("CUDA") == ops_cuda.NO_DRIVER
  assert "CUDA" not in ALL_DEVICES  # never the default device

def _cuda_or_skip() -> str:
  why = Device.open_error("CUDA")
  if why is not None: pytest.skip(f"no CUDA device here: {why}")
  return "CUDA"

def test_kernels_launch_on_the_gpu_and_match_the_emulator():
  """A grid of blocks with __shared__ memory and a barrier, float32 arithmetic and a float16 op, against the emulator."""
  dev = _cuda_or_skip()
  b = ProgramBuilder("launch_barrier")
  out, x = b.global_buf(F32, 64), b.global_buf(F32, 64)
  tmp = b.local_buf(F32, 16)
  g, t = b.gidx(0, 4), b.lidx(0, 16)
  i = b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(16, dtypes.int32)), t)
  b.store(tmp, t, b.alu(Ops.MUL, b.load(x, i), b.const(3.0, F32)))
  b.barrier()
  b.store(out, i, b.alu(Ops.ADD, b.load(tmp, b.alu(Ops.XOR, t, b.const(1, dtypes.int32))), b.load(x, i)))
  rng = np.random.default_rng(0)
  assert check_against_emulator(dev, b.build(), [np.zeros(64, np.float32), rng.standard_normal(64).astype(np.float32)]) > 0
  half = _binary(Ops.FDIV, dtypes.float16)
  xs = [np.zeros(4, np.float16), np.array([1, 3, -0.0, 65504], np.float16), np.array([3, 7, 2, 0.5], np.float16)]
  assert check_against_emulator(dev, half, xs) > 0


class FakeDriver:
  """The libcuda calls the CUDA device makes, on host memory, for testing the launch path without a GPU: memory is
  ctypes arrays, a module is the cubin NVRTC made (checked to be an ELF), and cuLaunchKernel decodes the grid, the
  block and kernelParams (each a pointer to a CUdeviceptr or an int32) and runs `program` (what the cubin was
  compiled from) on the emulator over that memory. The calls are recorded."""
  ATTRIBUTES = {"max_threads": 1024, "block_x": 1024, "block_y": 1024, "block_z": 64, "grid_x": 2**31 - 1,
                "grid_y": 65535, "grid_z": 65535, "shared_bytes": 49152, "major": 8, "minor": 0}
  def __init__(self, program: Program):
    self.program, self.calls, self.memory, self.functions = program, [], {}, []
  def attribute(self, dev, name: str) -> int: return self.ATTRIBUTES[name]
  def __call__(self, fn: str, *args) -> None:
    self.calls.append(fn)
    getattr(self, fn, lambda *a: None)(*args)
  def cuDeviceGetCount(self, count): count._obj.value = 1
  def cuDeviceGetName(self, buf, size, dev): buf.value = b"fake GPU"
  def cuDevicePrimaryCtxRetain(self, ctx, dev): ctx._obj.value = 1
  def cuMemAlloc_v2(self, ptr, size):
    mem = (ctypes.c_uint8 * size.value)()
    self.memory[ctypes.addressof(mem)] = mem
    ptr._obj.value = ctypes.addressof(mem)
  def cuMemFree_v2(self, ptr): del self.memory[ptr.value]
  def cuMemcpyHtoD_v2(self, dst, src, size): ctypes.memmove(dst.value, src, size.value)
  def cuMemcpyDtoH_v2(self, dst, src, size): ctypes.memmove(dst, src.value, size.value)
  def cuModuleLoadData(self, module, image):
    assert image.raw[:4] == b"\x7fELF"
    module._obj.value = 1
  def cuModuleGetFunction(self, fn, module, name):
    self.functions.append(name.decode())
    fn._obj.value = 2
  def cuLaunchKernel(self, fn, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
    p = self.program
    assert (gx.value, gy.value, gz.value) == p.global_size and (bx.value, by.value, bz.value) == p.local_size
    signature = [p.buffers[i] for i in sorted(p.buffers)]
    ptrs = [ctypes.c_uint64.from_address(params[k]).value for k in range(len(signature))]
    vals = [ctypes.c_int32.from_address(params[len(signature) + k]).value for k in range(len(p.vars))]
    views = [np.frombuffer(self.memory[a], dtype=to_np(ptr.base)) for a, ptr in zip(ptrs, signature)]
    emulate(p, views, vals=vals, inplace=True)

def test_the_driver_api_path_allocates_copies_and_launches_as_cuda_would(monkeypatch):
  """The launch path without a GPU, on FakeDriver: the device's limits and architecture come from the driver, the
  kernel is found by its extern "C" name in the NVRTC cubin, the buffers then the int vars are passed in kernelParams,
  the grid is global_size blocks of local_size threads, and the copies move the bytes both ways (the results are
  the emulator's, as the fake runs the program: what is checked is the plumbing)."""
  b = ProgramBuilder("fake_launch")
  out, x = b.global_buf(F32, 64), b.global_buf(F32, 64)
  n = b.var("n", 0, 64)
  g, t = b.gidx(0, 4), b.lidx(0, 16)
  i = b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(16, dtypes.int32)), t)
  b.store(out, i, b.alu(Ops.ADD, b.load(x, i), b.cast(n, F32)))
  program = b.build()
  r = CUDARenderer()
  fake = FakeDriver(lower_for(program, r))
  monkeypatch.setattr(ops_cuda, "Driver", lambda: fake)
  dev = ops_cuda.CUDADevice("CUDA")
  assert dev.arch == "sm_80" and dev.renderer.local_max == (1024, 1024, 64) and "fake GPU" in dev.describe()
  prg = dev.runtime(program.name, dev.compiler.compile(dev.renderer.render(program.name, fake.program)))
  xs = np.arange(64, dtype=np.float32)
  bufs = [dev.allocator.alloc(256) for _ in range(2)]
  dev.allocator._copyin(bufs[1], memoryview(xs.tobytes()))
  prg(*bufs, global_size=program.global_size, local_size=program.local_size, vals=(5,), wait=True)
  got = np.zeros(64, np.float32)
  dev.allocator._copyout(memoryview(got).cast("B"), bufs[0])
  assert fake.functions == ["k_fake_launch"] and "cuCtxSynchronize" in fake.calls
  np.testing.assert_array_equal(got, xs + 5)


# ***** tinygrad's CUDA and PTX toolchains (TINYGRAD:CUDA, TINYGRAD:PTX) *****

# The failures of tinygrad 0.10.1's NVIDIA toolchains on the suite's kernels, by kind: an error text pattern and what it
# is. Strict both ways: a kernel that fails with none of these fails the test, and a pattern no kernel shows any more
# fails it too (a tinygrad that fixes one shortens the list).
KNOWN_TINYGRAD_FAILURES: dict[str, dict[str, str]] = {
  "CUDA": {
    r"KeyError: <Ops\.FDIV": "its CUDARenderer has no FDIV rendering for some dtypes",
    r'identifier "(make_)?(bool|nv_bfloat16)\d?" is undefined': "vectors of bool and bfloat16 use types CUDA lacks",
    r'expected a ";"': "a vector type spelled with a space (make_unsigned long4) does not parse",
    r"expression must be a modifiable lvalue|has already been declared|expected a \"\)\"|no operator \"--\"":
      "other invalid CUDA C on vector and narrow-int kernels"},
  "PTX": {
    r"KeyError: dtypes\.bfloat16": "its PTXRenderer has no bfloat16",
    r"KeyError: <Ops\.(NEG|SUB|FDIV)": "its PTXRenderer lacks NEG / SUB / FDIV for some dtypes",
    r"Unexpected instruction types specified|Illegal modifier|modifier required": "ptxas rejects the PTX (8-bit max, mad.lo)"},
}

def _tinygrad_compile_results(kind: str, programs: list[Program]) -> tuple[int, int, dict[int, str]]:
  """(how many programs tinygrad has no form for, how many compiled, {program: failure}) for TINYGRAD:<kind>."""
  from refimpl.tinygrad.v0_10 import nvidia
  from refimpl.tinygrad.v0_10.exporter import ExportError
  tg_renderer, tg_compiler = nvidia.toolchain(kind)
  srcs, which, failed, no_form = [], [], {}, 0
  for k, p in enumerate(programs):
    try: srcs.append(nvidia.render(p, kind, tg_renderer, f"{p.name}_{k}"))
    except ExportError: no_form += 1
    except Exception as e: failed[k] = f"{type(e).__name__}: {e}"
    else: which.append(k)
  join = nvidia.one_translation_unit if kind == "CUDA" else nvidia.one_ptx_module
  many = lambda s: tg_compiler.compile(join(s))
  not_compiled = nvidia.failures(many, tg_compiler.compile, srcs)
  for j, why in not_compiled.items(): failed[which[j]] = why
  return no_form, len(srcs) - len(not_compiled), failed

def _tinygrad_compiles(kind: str, programs: list[Program]) -> None:
  """TINYGRAD:<kind>: every program tinygrad has a form for renders and compiles with tinygrad's own renderer and
  compiler (sm_80), except tinygrad 0.10.1's known failures, each of which is still there."""
  no_form, compiled, failed = _tinygrad_compile_results(kind, programs)
  known = KNOWN_TINYGRAD_FAILURES[kind]
  unknown = {k: why for k, why in failed.items() if not any(re.search(p, why) for p in known)}
  assert not unknown, "\n\n".join(f"{programs[k].name}: {why[:1500]}" for k, why in list(unknown.items())[:3])
  gone = [p for p in known if not any(re.search(p, why) for why in failed.values())]
  assert not gone, f"tinygrad's {kind} no longer fails with {gone}: remove them from KNOWN_TINYGRAD_FAILURES"
  assert compiled > len(programs) // 2 and no_form + compiled + len(failed) == len(programs)


# ***** bench/gpu_check.py's float32 sweep, on a CPU device and a small range *****

def _gpu_check():
  """bench/gpu_check.py as a module (bench/ is not a package); registered before it runs, as its dataclass needs."""
  if "gpu_check" in sys.modules: return sys.modules["gpu_check"]
  path = Path(__file__).resolve().parent.parent / "bench" / "gpu_check.py"
  spec = importlib.util.spec_from_file_location("gpu_check", path)
  module = importlib.util.module_from_spec(spec)
  sys.modules["gpu_check"] = module
  spec.loader.exec_module(module)
  return module

# chunks of 2^12 inputs (bits >> 12): around 1.0, 2^-126 (the smallest normals), -pi, +inf and the NaNs after it, -0
SWEEP_CHUNKS = [0x3F800, 0x00800, 0xC0490, 0x7F800, 0x80000]

@pytest.mark.parametrize("op", [Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP])
def test_gpu_check_sweep_chunks_and_checks_a_cpu_device(op):
  """The sweep of bench/gpu_check.py on CLANG (a correct backend): each chunk's lanes are the float32s with those bits,
  and every one is within the spec's rule (SQRT, RECIP correctly rounded; EXP2, LOG2, SIN within their ULP bound)."""
  if Device.open_error("CLANG") is not None: pytest.skip(f"CLANG does not open: {Device.open_error('CLANG')}")
  gc = _gpu_check()
  r = gc.sweep(op, "CLANG", bits=32, chunk_bits=12, threads=2, chunks=SWEEP_CHUNKS)
  assert (r.checked, r.failures, r.examples) == (len(SWEEP_CHUNKS) << 12, 0, [])

def test_gpu_check_sweep_reports_a_wrong_result_as_a_failure_with_its_input():
  """The check can fail: a SQRT one ulp off at one input, and an EXP2 beyond the bound, are failures naming the input."""
  gc = _gpu_check()
  x = (np.arange(4096, dtype=np.uint32) + 0x3F800000).view(np.float32)
  got = np.sqrt(x.astype(np.float64)).astype(np.float32)
  got[7] = np.nextafter(got[7], np.float32(np.inf))
  assert gc._check_slice(Ops.SQRT, 0x3F800000, got)[0::2] == (1, [0x3F800007])
  got = np.exp2(x.astype(np.float64)).astype(np.float32)
  got[5] = got[5] * np.float32(1 + 2**-20)
  failures, worst, examples = gc._check_slice(Ops.EXP2, 0x3F800000, got)
  assert (failures, examples) == (1, [0x3F800005]) and worst > 4
