"""The REFIMPL device for tinygrad 0.14: tinygrad 0.14 programs run whole on refimpl's emulator.

`install()` puts ops_refimpl.py (tinygrad 0.14's classes of the device, importable by name: 0.14 compiles in spawned
worker processes) in sys.modules as `tinygrad.runtime.ops_refimpl` (tinygrad 0.14 finds a device as that module) and
makes it the default (`DEV=REFIMPL`). Its renderer has tinygrad's PYTHON renderer's capabilities, so it
gets the kernels 0.14's emulator gets, but it renders each one as its KernelRecord (record.py: JSON, no pickle); the
"compiler" encodes that text; the program parses it once, translates it with the importer once per distinct launch
(dims), and runs it with `refimpl.emulator.machine.emulate`, strict, in place on the buffers. Undefined behaviour stops
the script with `KernelUndefinedBehavior` (the kernel, the uop, the lane, the operands); a kernel refimpl cannot
translate stops it with `TranslationError` naming the kernel and the uop. The device class holds the session (counts,
summary: refimpl.tinygrad.session), `device_session()`."""
from __future__ import annotations

import sys

from refimpl.tinygrad.lines import require
from refimpl.tinygrad.session import Session

DEVICE = "REFIMPL"


def install(default: bool = False) -> str:
  """Makes `Device["REFIMPL"]` a tinygrad 0.14 device (and the default one when `default`); returns its name."""
  require("0.14.0", "refimpl.tinygrad.v0_14.device")
  from tinygrad.device import Device
  from tinygrad.helpers import DEV

  from refimpl.tinygrad.v0_14 import ops_refimpl  # tinygrad 0.14's classes of the device
  sys.modules.setdefault(f"tinygrad.runtime.ops_{DEVICE.lower()}", ops_refimpl)
  if DEVICE not in Device._devices: Device._devices.append(DEVICE)
  if default: DEV.value = DEVICE
  return DEVICE


def device_session() -> Session:
  """The session of the REFIMPL devices (every REFIMPL:n shares it), installing the device first."""
  install()
  from refimpl.tinygrad.v0_14.ops_refimpl import RefimplDevice
  return RefimplDevice.session
