"""tinygrad 0.10.1's own CLANG, LLVM and GPU devices on pip's toolchains (refimpl.tinygrad.v0_10.toolchain): after
prepare_tinygrad(), every device it reports working runs a multiply, an int division and a sum correctly; CLANG works
with PATH emptied (through the ziglang package); a missing clang gives one clear line.

tinygrad opens a device once per process and caches compiled kernels on disk, so every device check runs in a fresh
subprocess (an argument list, sys.executable) with CACHELEVEL=0 and a temporary CACHEDB."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest.importorskip("tinygrad")

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEVICES = ("CLANG", "LLVM", "GPU")
TIMEOUT_S = 600

CHECKS = r"""
import json, sys
from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
first = prepare_tinygrad()
import tinygrad.runtime.ops_clang as tg_clang
compile_fn = tg_clang.ClangJITCompiler.compile
again = prepare_tinygrad()
out = {"reasons": first, "idempotent": again == first and tg_clang.ClangJITCompiler.compile is compile_fn, "devices": {}}
from tinygrad import Tensor, dtypes
A, B = [7, -7, 9, -100, 255, 0], [2, 2, -4, 7, 16, 3]
def run(dev):
  i32 = lambda xs: Tensor(xs, dtype=dtypes.int32, device=dev)
  return {"mul": (Tensor([1., 2., 3.], device=dev) * 2).tolist(),
          "idiv": (i32(A) // i32(B)).tolist(),
          "sum": Tensor.arange(100, device=dev).sum().item(),
          "fsum": Tensor([[0.5, 1.5, 2.0], [4.0, -1.0, 3.0]], device=dev).sum(axis=1).tolist()}
out["python_idiv"] = run("PYTHON")["idiv"]
for dev in sys.argv[1:]:
  if first[dev] is None:
    try: out["devices"][dev] = run(dev)
    except Exception as e: out["devices"][dev] = {"error": f"{type(e).__name__}: {e}"}
print("RESULT " + json.dumps(out))
"""

NO_CLANG = r"""
import json
from refimpl.backends import ops_clang
from refimpl.device import DeviceUnavailable
def missing(arch=None): raise DeviceUnavailable(ops_clang.MISSING)
ops_clang.find_clang = missing
import tinygrad.runtime.ops_clang as tg_clang
original = tg_clang.ClangJITCompiler.compile
from refimpl.tinygrad.v0_10.toolchain import prepare_tinygrad
reasons = prepare_tinygrad()
print("RESULT " + json.dumps({"reasons": reasons, "unpatched": tg_clang.ClangJITCompiler.compile is original}))
"""


def run_script(script: str, args: list[str], tmp_path: pathlib.Path, env: dict[str, str] | None = None) -> dict:
  """Runs `script` in a fresh interpreter with tinygrad's disk cache off; returns the JSON it printed after RESULT."""
  full = {**(os.environ if env is None else env), "CACHELEVEL": "0", "CACHEDB": str(tmp_path / "cache.db")}
  res = subprocess.run([sys.executable, "-c", script, *args], cwd=ROOT, env=full, capture_output=True, text=True,
                       timeout=TIMEOUT_S, check=False)
  lines = [ln for ln in res.stdout.splitlines() if ln.startswith("RESULT ")]
  assert res.returncode == 0 and lines, f"exit status {res.returncode}\n{res.stdout[-3000:]}\n{res.stderr[-3000:]}"
  return json.loads(lines[-1][len("RESULT "):])


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory) -> dict:
  """One subprocess: prepare_tinygrad(), then the checks on every device it reports working."""
  return run_script(CHECKS, list(DEVICES), tmp_path_factory.mktemp("tinygrad-toolchain"))


def test_reasons_are_none_or_one_line(checks: dict) -> None:
  assert set(checks["reasons"]) == set(DEVICES)
  for dev, why in checks["reasons"].items():
    assert why is None or (isinstance(why, str) and "\n" not in why and why.startswith(f"{dev}:")), (dev, why)


def test_prepare_is_idempotent(checks: dict) -> None:
  assert checks["idempotent"]


@pytest.mark.parametrize("dev", DEVICES)
def test_tinygrad_device_computes(checks: dict, dev: str) -> None:
  why = checks["reasons"][dev]
  if why is not None: pytest.skip(why)
  got = checks["devices"][dev]
  assert "error" not in got, got
  assert got["mul"] == [2.0, 4.0, 6.0]
  assert got["idiv"] == checks["python_idiv"]  # tinygrad's own PYTHON device decides the rounding of negatives
  assert [got["idiv"][k] for k in (0, 2, 4, 5)] == [3, -2, 15, 0]
  assert got["sum"] == 4950
  assert got["fsum"] == [4.0, 6.0]


def test_clang_without_path_uses_ziglang(tmp_path: pathlib.Path) -> None:
  if importlib.util.find_spec("ziglang") is None: pytest.skip("ziglang is not installed (pip install ziglang)")
  out = run_script(CHECKS, ["CLANG"], tmp_path, env={**os.environ, "PATH": ""})
  assert out["reasons"]["CLANG"] is None, out["reasons"]["CLANG"]
  got = out["devices"]["CLANG"]
  assert "error" not in got, got
  assert got["mul"] == [2.0, 4.0, 6.0] and got["idiv"] == out["python_idiv"] and got["sum"] == 4950


def test_missing_clang_is_one_clear_line(tmp_path: pathlib.Path) -> None:
  out = run_script(NO_CLANG, [], tmp_path)
  why = out["reasons"]["CLANG"]
  assert isinstance(why, str) and "\n" not in why and why.startswith("CLANG:") and "ziglang" in why and "install" in why
  assert out["unpatched"], "without a clang, tinygrad's own compile stays in place"


def test_zig_spelling_keeps_tinygrad_flags() -> None:
  """zig's spelling is tinygrad's flags with only the target respelled and debug info and unwind tables off; the object
  zig builds with it has no section tinygrad's loader would mishandle (.debug_*, .eh_frame)."""
  from refimpl.backends.ops_clang import _ziglang_command
  from refimpl.tinygrad.shared_toolchain import ZIG_EXTRA_FLAGS
  from refimpl.tinygrad.v0_10.toolchain import run_clang, zig_args
  command = _ziglang_command()
  if command is None: pytest.skip("ziglang is not installed (pip install ziglang)")
  args = zig_args(command)
  tinygrad = ["-c", "-x", "c", "-march=native", "-O2", "-fPIC", "-ffreestanding", "-fno-math-errno", "-nostdlib"]
  assert all(a in args for a in tinygrad) and not any(a.startswith("--target=") for a in args)
  assert args[args.index("-target") + 1].endswith("-linux-none") and all(f in args for f in ZIG_EXTRA_FLAGS)
  obj = run_clang(args, "float k(float* restrict a, int n) { float s = 0.5f; for (int i = 0; i < n; i++) s += a[i] * 3.0f; "
                        "return s; }")
  assert obj.startswith(b"\x7fELF") and b".eh_frame" not in obj and b".debug" not in obj
