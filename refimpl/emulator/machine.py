"""The PYTHON device's executor: runs a verified Program with every thread of the launch as a numpy lane.

    emulate(program, buffers, vals=(), strict=True) -> Emulation(buffers, certainty, events, deferred)

SIMT. All threads of the launch (global_size workgroups x local_size threads) run in lock step, one numpy lane each;
lane numbers are C-order positions in (gidx2, gidx1, gidx0, lidx2, lidx1, lidx0), so a workgroup's threads are
consecutive. Each uop runs once for every lane at a time, in program order. An *active mask* says which lanes are
executing: an IF narrows it to the lanes whose gate is true (the block is skipped when none is); a RANGE whose bounds
are the same on every lane runs its body for each counter value with the mask unchanged, otherwise the counter runs
from the smallest start to the largest end and a lane is active in the iterations inside its own [start, end). A
gated LOAD/STORE accesses memory only on active lanes whose gate is true. Inactive lanes compute harmless garbage:
they never write, never raise and never record an event. DEFINE_LOCAL is one array per workgroup; BARRIER is a
workgroup barrier (every thread reaches it, the verifier makes sure) and orders its workgroup's accesses to locals
and globals.
DEFINE_ACC is a register per lane; ASSIGN writes it on active lanes, and the ASSIGN uop reads as the register.

The rest of the executor's spec is in the module that implements it: values.py ("Values", "Certainty rule"),
state.py ("Control rule", "Undefined behaviour"), compute.py (the ops that compute values; "WMMA rule"), access.py
(memory access), blocks.py (RANGE and IF; "Loops as lanes"), plan.py (what is known before a run; "Speed"),
straight.py (straight-line stretches run as steps) and dispatch.py (what runs each uop). settings.py holds the
bounds and strategies a test may change.

Write after read. A load's race with a write that comes after it in lock step is known only at the write, after the
value loaded may have been used: the run records such writes (memory.LateWrites) and emulate runs the launch again on
the buffers as given, its loads marking the reads those writes race, until a run finds none it did not know (at most
RERUNS runs). The result, its events and strict mode's report are that last run's.

Memory bound. The values of a run's lanes take at most LANE_MEMORY bytes (estimated per lane from the program's uop
dtypes, twice for masks and temporaries). A launch that needs more runs in chunks of whole workgroups, each a run of
consecutive threads taking at most LANE_MEMORY / CHUNK_SHARE, one after another: thread ids, race tracking and event
lanes are the launch's, and strict mode raises, after the last chunk, the finding that comes first in the sequential
order (with the lanes of every chunk counted). A launch whose one workgroup does not fit in a chunk is refused up front
(LaunchTooLarge). A loop runs as lanes in chunks of iterations that fit, in order (sequentially when not even two do).
"""
from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from refimpl.emulator import settings
from refimpl.emulator.certainty import EXACT, is_loose, is_undefined
from refimpl.emulator.dispatch import handler_table
from refimpl.emulator.indexing import Grid
from refimpl.emulator.memory import LateWrites
from refimpl.emulator.plan import Plan
from refimpl.emulator.state import Machine
from refimpl.errors import UndefinedBehavior
from refimpl.ir import Program
from refimpl.ir.arguments import check_arguments

__all__ = ["Emulation", "LaunchTooLarge", "emulate"]


@dataclass
class Emulation:
  """The result of a run: every buffer after it (copies, flat), per buffer the certainty level of every element
  (refimpl/emulator/certainty.py; read-only where all are EXACT; only permissive mode leaves UNDEFINED ones), the
  undefined behaviour found (permissive mode), and every op of a deferred kind that made a value undefined, first lane
  of each (whether or not the value was used: in a defined program a WHERE discarded it). `undefined` and `loose` are
  the levels as bool masks."""
  buffers: list[np.ndarray]
  certainty: list[np.ndarray]
  events: list[UndefinedBehavior]
  deferred: list[UndefinedBehavior] = field(default_factory=list)

  @property
  def undefined(self) -> list[np.ndarray]:
    """Per buffer, the elements whose value is undefined."""
    return [_no_element(c.size) if _all_exact(c) else is_undefined(c) for c in self.certainty]

  @property
  def loose(self) -> list[np.ndarray]:
    """Per buffer, the loose elements: neither EXACT nor UNDEFINED."""
    return [_no_element(c.size) if _all_exact(c) else is_loose(c) for c in self.certainty]


BARRIER_SCOPES = ("workgroup", "local")

def emulate(program: Program, buffers: Sequence[np.ndarray], vals: Sequence[int] = (), strict: bool = True,
            inplace: bool = False, barrier_scope: str = "workgroup", lockstep: bool = False) -> Emulation:
  """Runs `program` on copies of `buffers` (one numpy array per DEFINE_GLOBAL, in number order, dtype to_np(base),
  size the declared size) with `vals` (one int per DEFINE_VAR). strict: raise UndefinedBehavior at the first
  undefined operation; otherwise record it and return masks (see the module docstring). inplace: run on the arrays
  themselves (flat contiguous ones; the PYTHON device's buffers) instead of copies; the result's buffers are them.
  barrier_scope: "workgroup" is the spec (a BARRIER orders its workgroup's locals and globals); "local" is a
  portability check, not the spec: a BARRIER orders locals only (OpenCL's barrier(CLK_LOCAL_MEM_FENCE) read
  literally, which is how tinygrad's OpenCL, Metal and WGSL renderers fence), so a kernel that needs global order
  across a barrier is undefined there. lockstep: a portability check, not the spec either: a read racing a write that
  comes after it in the emulator's lock-step order reads the old value (as the threads of one warp do), so only what
  such a kernel computes in lock step is checked (one run, no write-after-read re-run: `_launch`)."""
  if barrier_scope not in BARRIER_SCOPES: raise ValueError(f"barrier_scope is one of {BARRIER_SCOPES}, not {barrier_scope!r}")
  vals = tuple(int(v) for v in vals)
  plan = Plan.of(program, vals)
  check_arguments(program, plan.signature, buffers, vals)
  chunks = None
  if plan.grid.lanes * plan.lane_bytes > settings.LANE_MEMORY:
    chunks = plan.grid.chunks(max(1, settings.LANE_MEMORY // settings.CHUNK_SHARE // plan.lane_bytes))
    if not chunks:
      need = plan.grid.group * plan.lane_bytes
      raise LaunchTooLarge(f"{program.name}: one workgroup of {plan.grid.group} threads needs about {need / 2**30:.2f} GiB "
                           f"for its values (about {plan.lane_bytes} bytes per thread), more than the emulator's share for "
                           f"a chunk of workgroups, {settings.LANE_MEMORY / settings.CHUNK_SHARE / 2**30:g} GiB "
                           f"(refimpl.emulator.settings.LANE_MEMORY / CHUNK_SHARE); use smaller workgroups")
  return _launch(plan, buffers, strict, inplace, barrier_scope == "workgroup", chunks, lockstep)

def _launch(plan: Plan, buffers: Sequence[np.ndarray], strict: bool, inplace: bool, barrier_globals: bool,
            chunks: list[Grid] | None, lockstep: bool = False) -> Emulation:
  """Runs the launch, and again while a run finds new writes that race a read made before them by another thread
  (write after read: the read's value is undefined, memory.py's race rule): each run's loads know every such write
  found so far (LateWrites), and runs on the buffers as the caller gave them (inplace: put back). lockstep: one run,
  whose reads see what lock-step order gives them (emulate's portability check)."""
  late = LateWrites()
  saved = _saved_outputs(plan, buffers) if inplace and not lockstep else None
  for _ in range(settings.RERUNS):
    m = Machine(plan, handler_table(plan), buffers, strict, inplace, late)
    m.barrier_globals = barrier_globals
    try:
      with np.errstate(all="ignore"):  # the rules say what inf, NaN and overflow give
        if chunks is None: m.run(0, len(plan.uops))
        else: m.run_chunks(chunks)
    except UndefinedBehavior:
      if lockstep or not late.learn(m.late_found): raise
    else:
      if lockstep or not late.learn(m.late_found): return _result(m)
    for k, x in (saved or {}).items(): np.copyto(buffers[k], x)
  raise RuntimeError(f"internal error: {plan.program.name}: {settings.RERUNS} runs still found new write-after-read races "
                     f"(refimpl.emulator.settings.RERUNS)")

def _saved_outputs(plan: Plan, buffers: Sequence[np.ndarray]) -> dict[int, np.ndarray] | None:
  """Copies of the writable buffers the program stores to, where a run may have to be redone (it has memory that race
  tracking watches); None where none can."""
  if all(i in plan.free for i, _ in (*plan.global_defs, *plan.local_defs)): return None
  return {u.arg: np.array(buffers[u.arg]) for i, u in plan.global_defs
          if i in plan.stored and isinstance(buffers[u.arg], np.ndarray) and buffers[u.arg].flags.writeable}


class LaunchTooLarge(ValueError):
  """A launch whose single workgroup's lane state would not fit in a chunk: refused before anything runs."""


def _result(m: Machine) -> Emulation:
  """What a run leaves: the buffers, their levels, and its findings in the sequential order."""
  evs = [UndefinedBehavior(*e, kind=kind, **extra)
         for _, e, kind, extra in sorted(m.events.values(), key=lambda entry: entry[0])] if m.events else []
  mems = m.globals.values()
  deferred = [o.event for o in sorted(m.origins.values(), key=lambda o: o.key)] if m.origins else []
  return Emulation([g.data for g in mems], [_exact_levels(g.data.size) if g.cert is None else g.cert for g in mems], evs,
                   deferred)

@functools.lru_cache(maxsize=64)
def _no_element(n: int) -> np.ndarray:
  """An all-false mask of n elements, read-only and shared (a view of one value: no memory, whatever n is)."""
  return np.broadcast_to(np.False_, (n,))

@functools.lru_cache(maxsize=64)
def _exact_levels(n: int) -> np.ndarray:
  """n EXACT levels, read-only and shared (as _no_element)."""
  return np.broadcast_to(EXACT, (n,))

def _all_exact(levels: np.ndarray) -> bool:
  """Whether `levels` are the shared all-EXACT ones a run returns for a buffer nothing uncertain reached."""
  return levels is _exact_levels(levels.size)
