"""The tinygrad bridge's layout (refimpl/tinygrad/__init__.py): one core every tinygrad line reads, one adapter per line.
Checked on the package's static import graph (test_import_graph.loads: every import, at any level, and the packages
above each module reached)."""
from __future__ import annotations

import pytest
from test_import_graph import loads, modules

LINES = ("refimpl.tinygrad.v0_10", "refimpl.tinygrad.v0_14")
CORE = ["refimpl.tinygrad", "refimpl.tinygrad.lines", "refimpl.tinygrad.names", "refimpl.tinygrad.translation",
        "refimpl.tinygrad.session", "refimpl.tinygrad.program", "refimpl.tinygrad.cases", "refimpl.tinygrad.devices",
        "refimpl.tinygrad.shared_toolchain"]


def _adapter(module: str) -> str | None:
  """The line adapter `module` belongs to, or None."""
  return next((line for line in LINES if module == line or module.startswith(line + ".")), None)


def test_the_layout_names_real_modules():
  """Rule: the core and both adapters exist (the checks below are not vacuous)."""
  assert all(m in modules() for m in CORE + list(LINES))
  assert all(sum(1 for m in modules() if _adapter(m) == line) >= 5 for line in LINES)


@pytest.mark.parametrize("module", sorted(m for m in modules() if _adapter(m) is not None))
def test_a_line_adapter_loads_no_other_line(module):
  """Rule: importing a module of one tinygrad line's adapter loads nothing of the other line's (a 0.14 module running
  under tinygrad 0.14 never imports code written against 0.10.1's objects, and the reverse)."""
  other = [m for m in loads(module) if _adapter(m) not in (None, _adapter(module))]
  assert not other, sorted(other)


@pytest.mark.parametrize("module", CORE)
def test_the_core_loads_no_line_adapter(module):
  """Rule: what every line shares (the lines served, kernel names, the importers' shared parts, the session, the
  REFIMPL devices' program class, case files, the TINYGRAD devices' shared parts, shared toolchain facts) depends on no
  line's adapter."""
  adapters = [m for m in loads(module) if _adapter(m) is not None]
  assert not adapters, sorted(adapters)
