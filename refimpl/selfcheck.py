"""The device self-check, `python -m refimpl.selfcheck` (or `python -m refimpl.device`, which hands over to it): open every
known device and run [1, 2, 3] * 2 on it. It lives above the device layer: it imports refimpl.device and refimpl.runner,
and neither imports it."""
from __future__ import annotations

import sys
from typing import TextIO

import numpy as np

from refimpl.device import ALL_DEVICES, Device, DeviceError
from refimpl.dtype import dtypes
from refimpl.ir import Ops, ProgramBuilder
from refimpl.runner import run_program

NOT_BUILT = "not built yet"

def doubling_program():
  """out[i] = in[i] * 2.0 over three float32 elements, one thread per element."""
  b = ProgramBuilder("selfcheck_double")
  out, x = b.global_buf(dtypes.float32, 3), b.global_buf(dtypes.float32, 3)
  i = b.gidx(0, 3)
  b.store(out, i, b.alu(Ops.MUL, b.load(x, i), b.const(2.0, dtypes.float32)))
  return b.build()

def check_device(name: str) -> tuple[str, str]:
  """(status, detail): PASS; FAIL (it opens but the kernel fails or is wrong) with the reason; UNAVAILABLE (it does not
  open here: a toolchain or platform is missing) with what to install; or NOT BUILT."""
  try:
    out, _ = run_program(doubling_program(), np.zeros(3, np.float32), np.array([1, 2, 3], np.float32), device=name)
  except DeviceError as e: return ("NOT BUILT" if NOT_BUILT in str(e) else "UNAVAILABLE", str(e))
  except Exception as e: return "FAIL", f"{type(e).__name__}: {e}"
  if out.tolist() != [2.0, 4.0, 6.0]: return "FAIL", f"[1, 2, 3] * 2 gave {out.tolist()}"
  return "PASS", "[1, 2, 3] * 2 = [2, 4, 6]"

def run_selfcheck(out: TextIO = sys.stdout) -> int:
  """Prints one line per device (a * marks the default). Returns the number of devices that open but fail."""
  names = ALL_DEVICES + [d for d in Device._devices if d not in ALL_DEVICES]
  results = {name: check_device(name) for name in names}
  try: default = Device.DEFAULT
  except DeviceError: default = None
  for name, (status, detail) in results.items():
    lines = detail.splitlines() or [""]
    more = f" (+{len(lines) - 1} more lines: run refimpl.selfcheck.check_device({name!r}) for all)" if len(lines) > 1 else ""
    print(f"{'*' if name == default else ' '} {name:<8} {status:<11} {lines[0]}{more}", file=out)
  if default is None: print("no device opens here: see the reasons above", file=out)
  return sum(status == "FAIL" for status, _ in results.values())


if __name__ == "__main__":
  sys.exit(1 if run_selfcheck() else 0)
