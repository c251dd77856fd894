"""`TinygradDevice`: the TINYGRAD device class of the installed tinygrad line (refimpl.tinygrad.lines.installed), what
refimpl.device's OPT_IN_DEVICES names for `TINYGRAD:<NAME>`: refimpl.tinygrad.v0_14.backend's under tinygrad 0.14.0,
refimpl.tinygrad.v0_10.backend's otherwise (0.10.1; with another tinygrad or none, that class says which line it needs)."""
from __future__ import annotations

from typing import Any

from refimpl.tinygrad.lines import installed


def __getattr__(name: str) -> Any:
  if name != "TinygradDevice": raise AttributeError(name)
  if installed() == "0.14.0":
    from refimpl.tinygrad.v0_14.backend import TinygradDevice as Device14
    return Device14
  from refimpl.tinygrad.v0_10.backend import TinygradDevice
  return TinygradDevice
