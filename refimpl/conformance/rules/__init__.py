"""The spec's rules, checked on every backend (the `backend` fixture: every device that opens, PYTHON included; select
with --backend). Part of the packaged conformance suite (refimpl.conformance). What is specific to one of refimpl's own
backends (toolchains, flags, caches, ELF / IR / OpenCL details) lives in refimpl's spec_tests/test_backend_<name>.py;
spec_tests/test_backend_llvm.py also runs these tests unoptimized, on LLVM:O0.

One module per rule family, named as the family's emulator tests are in refimpl's spec_tests/semantics/ (test_idiv_mod.py
holds IDIV and MOD there and here): test_int_wrap, test_idiv_mod, test_shifts, test_max, test_compare, test_bool,
test_mulacc, test_float_arith, test_trunc, test_cast, test_float_to_int, test_cast_bool, test_bitcast, test_threefry,
test_transcendental. The rest are program-level: test_memory (LOAD / STORE, constants), test_loops, test_vectors,
test_grid, test_kernels (the kernel as a whole), and test_every_op (every op and cast against the emulator). common.py
holds what several of them share.

Expected values come from the rule each test names, computed with Python ints / fractions, IEEE floats, the exact
rational oracle of refimpl.testing.oracle (one correct rounding of the exact result), or the emulator's op semantics
(refimpl.emulator) as the oracle for the broad op x dtype and cast sweeps and whole programs. Inputs the spec leaves
undefined are replaced by defined ones before a launch. A test that needs a capability (a dtype, subnormals,
correctly rounded float32 division) checks the device for it and is skipped where it is missing.
"""
from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from types import ModuleType


def modules() -> list[ModuleType]:
  """The rule modules (this package's test_*.py), by name."""
  names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name.startswith("test_"))
  return [importlib.import_module(f"{__name__}.{name}") for name in names]

def tests() -> dict[str, Callable]:
  """Every rule test of every module, name -> function (the names are unique across the modules)."""
  out: dict[str, Callable] = {}
  for mod in modules():
    for name, fn in vars(mod).items():
      if not name.startswith("test_") or not callable(fn) or getattr(fn, "__module__", None) != mod.__name__: continue
      assert name not in out, f"{name} is in two rule modules"
      out[name] = fn
  return out
