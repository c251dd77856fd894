"""The tinygrad lines refimpl's bridge serves, and which one is installed.

The bridge's parts that do not depend on tinygrad (the case format, the report, the corpus) serve every line; what
reads tinygrad's own objects is written per line: `refimpl.tinygrad.v0_10` (importer, capture, the REFIMPL and
TINYGRAD devices, exporter, toolchains) for 0.10.1, `refimpl.tinygrad.v0_14` (the same jobs for its kernel form) for 0.14.0.
A part asked for under another tinygrad says which line it needs and which is installed (`require`)."""
from __future__ import annotations

from importlib import metadata

SUPPORTED = ("0.10.1", "0.14.0")


class UnsupportedTinygrad(RuntimeError):
  """The installed tinygrad is not the line a part of the bridge serves (or none is installed)."""


def installed() -> str | None:
  """The installed tinygrad's version, or None."""
  try: return metadata.version("tinygrad")
  except metadata.PackageNotFoundError: return None


def require(line: str, what: str) -> None:
  """Raises UnsupportedTinygrad unless tinygrad `line` is installed, naming `what` needs it and what to install."""
  have = installed()
  if have == line: return
  found = "no tinygrad is installed" if have is None else f"tinygrad {have} is installed"
  raise UnsupportedTinygrad(f"{what}: made for tinygrad {line}, but {found}: pip install tinygrad=={line} "
                            f"(refimpl's bridge serves tinygrad {' and '.join(SUPPORTED)}; see docs/tinygrad-0.14.md)")
