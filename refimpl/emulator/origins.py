"""Where a deferred kind of undefined behaviour made values undefined (refimpl/emulator/ub.py), and which of those a use
may name: an `Origin` per deferred op, and the sequential order of its occurrences while loops run as lanes.

A place in the sequential order is (loop, counter) for each RANGE around the uop, outermost first, then the uop: a
`Places` holds the loops and one row of counters per lane. Places compare as tuples do, which is the order in which the
sequential rule executes (machine.py, "Loops as lanes").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from refimpl.errors import UndefinedBehavior


class Places(NamedTuple):
  """Lanes' places in the sequential order: the RANGEs around the uop (outermost first) and, per lane, their counters
  (L, len(loops)); with the uop and the thread they make `Machine.order_key`."""
  loops: tuple[int, ...]
  counters: np.ndarray


@dataclass
class Origin:
  """Where a deferred kind made values undefined (Machine.defer): the report of its first lane in the sequential order
  (`key`), and per thread of the launch whether it happened on that thread; while loops run as lanes, per thread the
  place of its first time there instead (`running`: (threads ascending, their places) per record, so that a use sees
  only what came before it), until the last such loop ends (`settle`)."""
  key: tuple[int, ...]
  event: UndefinedBehavior | None
  threads: np.ndarray
  running: list[tuple[np.ndarray, Places]] = field(default_factory=list)

  def record(self, tids: np.ndarray, places: Places) -> None:
    """Remembers the first place of each thread among `tids` (one per lane, with `places`)."""
    order = np.lexsort((*places.counters.T[::-1], tids))
    first = order[np.r_[True, tids[order][1:] != tids[order][:-1]]]
    self.running.append((tids[first], Places(places.loops, places.counters[first])))

  def settle(self) -> None:
    """No loop runs as lanes any more: every place recorded is before what follows."""
    for tids, _ in self.running: self.threads[tids] = True
    self.running = []

  def before(self, o: int, tids: np.ndarray, places: Places, i: int) -> np.ndarray:
    """Per lane (thread `tids`, place `places` at uop i), whether this origin (uop o) happened on its thread before
    that, among the places recorded while loops run as lanes."""
    out = np.zeros(len(tids), dtype=bool)
    b = [x for r, col in zip(places.loops, places.counters.T) for x in (r, col)] + [i]
    for rec_tids, rec in self.running:
      at = np.minimum(np.searchsorted(rec_tids, tids), len(rec_tids) - 1)
      found = rec_tids[at] == tids
      a = [x for r, col in zip(rec.loops, rec.counters[at].T) for x in (r, col)] + [o]
      less, tied = np.zeros(len(tids), dtype=bool), np.ones(len(tids), dtype=bool)
      for x, y in zip(a, b):  # tuple order, element by element
        less |= tied & (x < y)
        tied &= x == y
      out |= found & less
    return out
