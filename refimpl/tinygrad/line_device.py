"""`TinygradDevice`: the TINYGRAD device class of the installed tinygrad line (refimpl.tinygrad.lines.installed), what
refimpl.device's OPT_IN_DEVICES names for `TINYGRAD:<NAME>`: refimpl.tinygrad.v0_14.backend's under tinygrad 0.14.0,
refimpl.tinygrad.v0_10.backend's otherwise (0.10.1; with another tinygrad or none, that class says which line it needs
when it is opened). Importing it imports no tinygrad."""
from __future__ import annotations

from refimpl.device import Compiled
from refimpl.tinygrad.lines import installed


def line_device_class() -> type[Compiled]:
  """The TINYGRAD device class of the installed line."""
  if installed() == "0.14.0":
    from refimpl.tinygrad.v0_14.backend import TinygradDevice as Device14
    return Device14
  from refimpl.tinygrad.v0_10.backend import TinygradDevice as Device10
  return Device10


TinygradDevice = line_device_class()
