"""What a run of a tinygrad script on the reference reports, whichever tinygrad line runs it (the REFIMPL devices of
refimpl.tinygrad.v0_10.reference for 0.10.1 and refimpl.tinygrad.v0_14 for 0.14): undefined behaviour in a kernel, named, and
the session's counts, progress and summary. Imports no tinygrad."""
from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from refimpl.errors import UndefinedBehavior
from refimpl.tinygrad.translation import TranslationError


class KernelUndefinedBehavior(UndefinedBehavior):
  """Undefined behaviour in a tinygrad kernel run on the reference: UndefinedBehavior's fields plus the kernel name and,
  where tinygrad's metadata says, the Tensor ops the kernel computes (`tensor_ops`)."""
  def __init__(self, kernel: str, ub: UndefinedBehavior, saved: str = ""):
    self.kernel, self.tensor_ops, self.ub, self.saved = kernel, (), ub, saved
    super().__init__(ub.op, ub.uop_index, ub.lane, ub.operands, ub.reason, ub.count, ub.kind, ub.use, ub.origin)
    self.args = (f"tinygrad kernel {kernel}: {ub}{saved}",)

  def name_tensor_ops(self, ops: tuple[str, ...]) -> None:
    """Adds the Tensor ops the kernel came from (tinygrad's ExecItem metadata) to the message."""
    self.tensor_ops = ops
    self.args = (f"tinygrad kernel {self.kernel} (Tensor ops: {', '.join(ops)}): {self.ub}{self.saved}",)

  def __str__(self) -> str: return self.args[0]


@dataclass
class Session:
  """What a run of a tinygrad script on the reference (or under the check) saw. A REFIMPL device holds its own
  (refimpl.tinygrad.v0_10.reference.device_session, refimpl.tinygrad.v0_14.device.device_session); a check makes one."""
  out: TextIO = sys.stderr
  progress: bool = False  # a line on `out` every 2 s of running (python -m refimpl.tinygrad run sets it)
  runs: int = 0
  kernels: set = field(default_factory=set)
  disagreements: list[str] = field(default_factory=list)
  undefined: list[str] = field(default_factory=list)
  untranslatable: dict[str, str] = field(default_factory=dict)
  save_undefined: Path | None = None  # where the REFIMPL device saves a reproducer of each kernel with undefined behaviour
  started: float = field(default_factory=time.perf_counter)
  last_progress: float = field(default_factory=time.perf_counter)

  def ran(self, name: str) -> None:
    self.runs += 1
    self.kernels.add(name)
    now = time.perf_counter()
    if self.progress and now - self.last_progress >= 2.0:
      self.last_progress = now
      print(f"refimpl: {self.runs} kernel runs, {len(self.kernels)} kernels, {len(self.disagreements)} disagreements, "
            f"{len(self.undefined)} undefined ({now - self.started:.0f} s)", file=self.out, flush=True)

  def untranslatable_kernel(self, name: str, e: TranslationError) -> TranslationError:
    """Records that tinygrad kernel `name` has no translation (`e`); returns the error to raise, naming the kernel."""
    self.untranslatable[name] = str(e)
    return TranslationError(e.index, e.op, f"{e.why} (tinygrad kernel {name})")

  def summary(self) -> str:
    lines = [f"refimpl: {self.runs} kernel runs of {len(self.kernels)} kernels in {time.perf_counter() - self.started:.1f} s; "
             f"{len(self.disagreements)} disagreements, {len(self.undefined)} with undefined behaviour, "
             f"{len(self.untranslatable)} not translatable"]
    lines += [f"  disagreement: {d}" for d in self.disagreements] + [f"  undefined: {u}" for u in self.undefined]
    lines += [f"  not translatable: {k}: {why}" for k, why in self.untranslatable.items()]
    return "\n".join(lines)

