"""A porter's own tinygrad 0.14 device, named as refimpl names one under 0.10.1: `module:Class`, a subclass of
tinygrad's `Compiled` importable by that name (its package installed, or on PYTHONPATH).

tinygrad 0.14 opens a device by name only (`Device["CPU"]` imports `tinygrad.runtime.ops_cpu` and takes its class
`CPUDevice`). `register("my_pkg.ops_mydev:MyDevice")` makes the class a device of that registry under the class's name
less its "Device" suffix, upper-case (`MYDEV`), so DEV, `Device[...]` and `run --check` take it. Its renderer travels to
tinygrad's compile workers by its class's import path, as any 0.14 renderer does, so nothing else has to be registered
in them (they never open a device).

A spec names a porter's device when the part before the colon is not a tinygrad device name: `CPU:LLVM` is tinygrad's
CPU device with its LLVM renderer, `my_pkg.ops_mydev:MyDevice` a porter's class."""
from __future__ import annotations

import importlib
import sys
import types


class PorterDeviceError(ValueError):
  """A `module:Class` that does not name a tinygrad 0.14 device class: the message says what is wrong."""


def names_a_class(spec: str) -> bool:
  """Whether `spec` is `module:Class` rather than tinygrad's own `DEVICE[:renderer]` (module docstring)."""
  from tinygrad.device import Device
  head, sep, tail = spec.partition(":")
  return bool(sep and tail) and head.upper() not in Device._devices


def register(spec: str) -> str:
  """Registers the porter's class `spec` as a tinygrad 0.14 device (module docstring); returns the name it opens by."""
  from tinygrad.device import Compiled, Device
  module_name, _, class_name = spec.partition(":")
  try: module = importlib.import_module(module_name)
  except Exception as e: raise PorterDeviceError(f"{spec}: module {module_name} does not import: {type(e).__name__}: {e}") from e
  cls = getattr(module, class_name, None)
  if cls is None: raise PorterDeviceError(f"{spec}: module {module_name} has no {class_name}")
  if not (isinstance(cls, type) and issubclass(cls, Compiled)):
    raise PorterDeviceError(f"{spec}: {class_name} is not a subclass of tinygrad's Compiled (tinygrad.device.Compiled)")
  name = class_name.removesuffix("Device").upper()
  registered = f"tinygrad.runtime.ops_{name.lower()}"
  if name in Device._devices and getattr(sys.modules.get(registered), f"{name}Device", None) is not cls:
    raise PorterDeviceError(f"{spec}: its name {name} is tinygrad's own device {name}; rename the class")
  alias = types.ModuleType(registered, f"tinygrad 0.14's registry entry of the porter's device {spec}")
  setattr(alias, f"{name}Device", cls)  # tinygrad finds the class whose name, lower-cased, is "<name>device"
  sys.modules[registered] = alias
  if name not in Device._devices: Device._devices.append(name)
  return name
