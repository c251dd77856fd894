"""The import graph of the refimpl package, built statically from the source with `ast`: every import statement of a
module counts, at module level, inside a function (a function-level import is a dependency all the same; hiding a
cycle in one only moves the failure to call time) or in its `if __name__ == "__main__":` block (an entry point that
imports a module above its own is a cycle too: the self-check is started from refimpl.selfcheck's own block).

  - no cycle;
  - the device self-check lives above the device layer, with its own entry point;
  - no backend (refimpl/backends/ops_*.py, the emulator's PYTHON device included) imports another, even through others;
  - no module of the executor (refimpl/emulator/) imports the device layer: not refimpl.runner, refimpl.device, a
    backend, ctypes or mmap; nor anything of refimpl above it: the IR, the dtypes and the errors are all it reaches;
  - the renderers raise CompileError from refimpl.errors and import no device layer either.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "refimpl"


@functools.cache
def modules() -> dict[str, Path]:
  """Dotted name -> source file of every module of the package (a package is its __init__.py)."""
  out = {}
  for f in sorted(PACKAGE.rglob("*.py")):
    parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__": parts.pop()
    out[".".join(parts)] = f
  return out

def _imported(name: str, node: ast.Import | ast.ImportFrom, is_package: bool) -> list[str]:
  """The modules one import statement of module `name` loads: a refimpl module by its dotted name (`from pkg import
  sub` loads pkg.sub; `from pkg import name` loads pkg), anything else by its top-level name."""
  if isinstance(node, ast.Import): targets = [a.name for a in node.names]
  else:
    base = node.module or ""
    if node.level:
      here = name.split(".") if is_package else name.split(".")[:-1]
      base = ".".join(here[:len(here) - node.level + 1] + ([base] if base else []))
    subs = [f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in modules()]
    targets = subs + ([base] if len(subs) < len(node.names) else [])
  return [t if t in modules() else t.split(".")[0] for t in targets]

def imports_of(name: str, source: str, is_package: bool = False) -> frozenset[str]:
  """The modules the source of module `name` imports, wherever the import statement is."""
  found = set()
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, (ast.Import, ast.ImportFrom)): found.update(_imported(name, node, is_package))
  found.discard(name)
  return frozenset(found)

@functools.cache
def graph() -> dict[str, frozenset[str]]:
  """Module -> the modules it imports (refimpl modules by dotted name, others by top-level name)."""
  return {name: imports_of(name, path.read_text(), path.name == "__init__.py") for name, path in modules().items()}

def find_cycle() -> list[str] | None:
  """One cycle of the graph (its modules, the first repeated at the end), or None."""
  g, state, stack = graph(), {}, []
  def visit(v: str) -> list[str] | None:
    state[v] = "open"
    stack.append(v)
    for w in sorted(g.get(v, ())):
      if w not in g or state.get(w) == "done": continue
      if state.get(w) == "open": return stack[stack.index(w):] + [w]
      found = visit(w)
      if found is not None: return found
    stack.pop()
    state[v] = "done"
    return None
  for v in sorted(g):
    found = None if v in state else visit(v)
    if found is not None: return found
  return None

def loads(name: str) -> set[str]:
  """Everything importing module `name` loads: what it imports, transitively, and the packages above each refimpl
  module reached (importing refimpl.a.b runs refimpl/__init__.py and refimpl/a/__init__.py first)."""
  g, seen, todo = graph(), set(), [name]
  while todo:
    v = todo.pop()
    if v in seen: continue
    seen.add(v)
    if v not in g: continue
    parts = v.split(".")
    todo += [".".join(parts[:k]) for k in range(1, len(parts))] + sorted(g[v])
  seen.discard(name)
  return seen

BACKENDS = sorted(m for m in modules() if m.startswith("refimpl.backends.ops_"))
RENDERERS = ["refimpl.backends.cstyle", "refimpl.backends.llvmir", "refimpl.backends.opencl"]
DEVICE_LAYER = {"refimpl.runner", "refimpl.device", "ctypes", "mmap"}


MAIN_BLOCK_IMPORT = """
import refimpl.ir
def f():
  from refimpl.lower import lower_for
if __name__ == "__main__":
  from refimpl.selfcheck import run_selfcheck
"""

def test_the_graph_sees_every_kind_of_import():
  """Rule: the graph holds module-level, function-level, relative and `__main__`-block imports."""
  assert {"refimpl.ir.program", "refimpl.ir.verify", "refimpl.ir.dtype_text"} <= graph()["refimpl.ir.serialize"]
  assert "refimpl.fuzz.shapes" in graph()["refimpl.fuzz.generate"]
  assert imports_of("refimpl.x", MAIN_BLOCK_IMPORT) == {"refimpl.ir", "refimpl.lower", "refimpl.selfcheck"}
  assert len(BACKENDS) >= 5 and "refimpl.backends.ops_python" in BACKENDS and all(m in modules() for m in BACKENDS + RENDERERS)

def test_the_package_has_no_import_cycle():
  """Rule: no module imports itself through others, at any level (program.py knows nothing of JSON or the verifier;
  the generation modes build on grow.py, below generate.py; the finding format, finding.py, is below the replay)."""
  cycle = find_cycle()
  assert cycle is None, "import cycle: " + " -> ".join(cycle)

def test_the_selfcheck_lives_above_the_device_layer_with_its_own_entry_point():
  """Rule: refimpl.selfcheck imports the device layer and nothing below it imports refimpl.selfcheck (`python -m
  refimpl.device` hands over to it by name); the self-check is started from its own `__main__` block."""
  assert {"refimpl.device", "refimpl.runner"} <= graph()["refimpl.selfcheck"]
  assert "refimpl.selfcheck" not in loads("refimpl.device") | loads("refimpl.runner")
  assert '__name__ == "__main__"' in modules()["refimpl.selfcheck"].read_text()

@pytest.mark.parametrize("module", BACKENDS)
def test_a_backend_imports_no_other_backend(module):
  """Rule: a backend (a device's ops_*.py) reaches no other backend's module, directly or through shared ones."""
  others = set(BACKENDS) - {module}
  assert not loads(module) & others, sorted(loads(module) & others)

EMULATOR = sorted(m for m in modules() if m.startswith("refimpl.emulator."))

@pytest.mark.parametrize("module", EMULATOR)
def test_the_emulator_imports_no_device_layer(module):
  """Rule: no module of refimpl.emulator (the executor, the spec's semantics) loads refimpl.runner, refimpl.device, a
  backend (refimpl.backends), ctypes or mmap, so the spec runs without the device machinery; the PYTHON device that
  wraps it is a backend (refimpl/backends/ops_python.py)."""
  reached = {m for m in loads(module) if m in DEVICE_LAYER or m.startswith("refimpl.backends")}
  assert not reached, sorted(reached)

BELOW_THE_EMULATOR = ("refimpl.ir", "refimpl.dtype", "refimpl.errors")

@pytest.mark.parametrize("module", EMULATOR)
def test_the_emulator_reaches_only_the_ir_below_it(module):
  """Rule: every arrow out of refimpl.emulator points down, to the IR, the dtypes and the errors (and the package
  refimpl itself, which importing any of them runs): none up to the lowering, the backends, the device layer, the
  fuzzer, the sweeps, the bridges or the tests, so the executor is read and run without what is built on it."""
  package = loads("refimpl") | {"refimpl"}
  below = ("refimpl.emulator", *BELOW_THE_EMULATOR)
  reached = {m for m in loads(module) - package
             if m.startswith("refimpl.") and not any(m == b or m.startswith(b + ".") for b in below)}
  assert not reached, sorted(reached)

@pytest.mark.parametrize("renderer", RENDERERS)
def test_a_renderer_imports_no_device_layer(renderer):
  """Rule: a renderer turns a Program into source text; its CompileError comes from refimpl.errors, and it loads no
  device layer (refimpl.device keeps exporting CompileError, tinygrad's device contract)."""
  assert "refimpl.errors" in graph()[renderer]
  assert not loads(renderer) & DEVICE_LAYER, sorted(loads(renderer) & DEVICE_LAYER)

WORKERS = sorted(m for m in modules() if m.startswith("refimpl.workers"))

@pytest.mark.parametrize("module", WORKERS)
def test_the_worker_pool_lies_below_its_two_users(module):
  """Rule: refimpl.workers (the one worker pool, its protocol and progress line) reaches no module of its users, the
  fuzzer (refimpl.fuzz) and the sweeps (refimpl.sweep), and no refimpl module but its own (and what importing the
  package refimpl itself loads): what a worker does is the user's `Work`."""
  package = loads("refimpl")
  reached = {m for m in loads(module) - package if m.startswith("refimpl.") and not m.startswith("refimpl.workers")}
  assert not reached, sorted(reached)

@pytest.mark.parametrize("user", ["refimpl.fuzz.campaign", "refimpl.fuzz.corpus", "refimpl.sweep.__main__"])
def test_campaigns_and_sweeps_run_on_the_one_worker_pool(user):
  """Rule: fuzz campaigns, replays and float32 sweeps get their worker processes from refimpl.workers, and no module of
  refimpl.fuzz or refimpl.sweep starts processes of its own (multiprocessing, concurrent.futures)."""
  assert loads(user) & {"refimpl.workers.local", "refimpl.workers.cluster"}
  own = [m for m in modules() if m.startswith(("refimpl.fuzz.", "refimpl.sweep."))
         and graph()[m] & {"multiprocessing", "concurrent"}]
  assert not own, own
