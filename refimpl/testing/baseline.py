"""Judging a device against the device it derives from (`--baseline NAME`): only what differs is the device's own.

A porter's device derived from another (a tinygrad device built on tinygrad's CLANG renderer) inherits that device's
failures. With a baseline, every kernel the suite builds and runs on the device under test (refimpl.runner.Kernel) is
built and run on the baseline too, with the same program and the same inputs, and the two results are compared
element by element. A failing test of the device is then:

  inherited   at least one kernel was compared, and on every one the device did what the baseline did: the same
              bits in every element the spec defines (or both builds / both runs failed with the same error type).
              The baseline fails the same way on the same inputs, so the failure is not the device's: "as on the
              baseline" (reported as an expected failure, counted apart).
  difference  some element the spec defines differs from the baseline's, and the device's value there is not the
              one value the spec pins (a device that fixes a baseline bug is not worse for it); or the device fails
              to build or run a kernel the baseline builds and runs. The test stays failed, with the first
              differing elements beside its own report.
  not compared  no kernel ran before the failure: the test is run again with the baseline as its backend, and it
              is inherited when the baseline fails with the same error type and message (the names aside).

Comparing lanes, not test ids, is what makes this deterministic: a hypothesis test draws different examples from run
to run, but each example the device fails is run on the baseline with the same inputs."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from refimpl.emulator.certainty import is_one_value, is_undefined
from refimpl.emulator.machine import emulate
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Program
from refimpl.runner import Kernel
from refimpl.testing.compare import same_value

SHOWN = 3  # differing elements shown per kernel


def error_kind(e: BaseException) -> str: return type(e).__name__


@dataclass
class Comparison:
  """What one test's kernels did on the device and on the baseline."""
  device: str
  compared: int = 0
  differences: list[str] = field(default_factory=list)


class BaselineWatcher:
  """Builds and runs each of the device's kernels on the baseline too (refimpl.runner.Watcher), for the current test."""
  def __init__(self, baseline: str):
    self.baseline = baseline
    self.current: Comparison | None = None
    self._kernels: dict[int, tuple[Program, Kernel | Exception]] = {}  # id(program) -> the baseline's build of it

  def start(self, device: str) -> Comparison:
    self.current = Comparison(device)
    return self.current

  def stop(self) -> Comparison | None:
    current, self.current = self.current, None
    return current

  def _baseline_kernel(self, program: Program) -> Kernel | Exception:
    """The baseline's build of `program` (or the exception building it), built once per program object."""
    cached = self._kernels.get(id(program))
    if cached is not None and cached[0] is program: return cached[1]
    try: built: Kernel | Exception = Kernel(program, self.baseline)
    except Exception as e: built = e
    if len(self._kernels) > 512: self._kernels.clear()
    self._kernels[id(program)] = (program, built)
    return built

  def built(self, program: Program, device: str, error: Exception | None) -> None:
    current = self.current
    if current is None or device != current.device or error is None: return  # a successful build is compared at its run
    base = self._baseline_kernel(program)
    current.compared += 1
    if not isinstance(base, Exception):
      current.differences.append(f"{program.name}: the device cannot build it ({error_kind(error)}: {first_line(error)}) "
                                 f"where {self.baseline} builds it")
    elif error_kind(base) != error_kind(error):
      current.differences.append(f"{program.name}: the device fails to build it with {error_kind(error)}, "
                                 f"{self.baseline} with {error_kind(base)}")

  def ran(self, kernel: Kernel, arrays: Sequence[np.ndarray], vals: Sequence[int], outputs: list[np.ndarray] | None,
          error: Exception | None) -> None:
    current = self.current
    if current is None or kernel.device.device != current.device: return
    current.compared += 1
    program = kernel.program
    base = self._baseline_kernel(program)
    base_error: Exception | None = base if isinstance(base, Exception) else None
    base_outputs = None
    if base_error is None:
      try: base_outputs = base(*arrays, vals=vals)
      except Exception as e: base_error = e
    if error is not None or base_error is not None:
      if error is None or base_error is None or error_kind(error) != error_kind(base_error):
        device_did = "runs it" if error is None else f"fails with {error_kind(error)}: {first_line(error)}"
        base_did = "runs it" if base_error is None else f"fails with {error_kind(base_error)}: {first_line(base_error)}"
        current.differences.append(f"{program.name}: the device {device_did}; {self.baseline} {base_did}")
      return
    assert outputs is not None and base_outputs is not None
    found = differing_elements(program, arrays, vals, outputs, base_outputs)
    if found: current.differences.append(f"{program.name}: " + "; ".join(found))


def first_line(e: BaseException) -> str: return (str(e).splitlines() or [""])[0][:200]


def differing_elements(program: Program, arrays: Sequence[np.ndarray], vals: Sequence[int],
                       got: list[np.ndarray], base: list[np.ndarray]) -> list[str]:
  """Where the device's buffers differ from the baseline's in an element the spec defines and the device's value is not
  the one the spec pins (up to SHOWN per kernel, then a count). Empty when the two agree, which is the common case:
  the emulator runs only when they do not."""
  if all(same_value(g, b).all() for g, b in zip(got, base)): return []
  try: ref = emulate(program, list(arrays), vals=tuple(vals), strict=False)
  except UndefinedBehavior: return []  # not reached: permissive mode records, it does not raise
  shown: list[str] = []
  total = 0
  for k, (g, b, want, levels) in enumerate(zip(got, base, ref.buffers, ref.certainty)):
    differ = ~same_value(g, b) & ~is_undefined(levels)
    differ &= ~(is_one_value(levels) & same_value(g, want))
    where = np.flatnonzero(differ)
    total += len(where)
    shown += [f"buffer {k} element {i}: device {g[i]!r}, baseline {b[i]!r}, spec {want[i]!r}"
              for i in where[:SHOWN - len(shown)]]
  if total > len(shown): shown.append(f"{total} elements in all")
  return shown
