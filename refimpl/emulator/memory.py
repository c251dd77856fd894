"""Emulator memory: buffers and locals with their bookkeeping, where an access lands, and race tracking.

A `Memory` is one flat numpy array per DEFINE_GLOBAL (its `size` elements) or DEFINE_LOCAL (one block of `size`
elements per workgroup: workgroup w owns [w*size, (w+1)*size)), with per-element arrays beside it:
  cert     the stored value's certainty level (refimpl/emulator/certainty.py): what was stored with it, UNDEFINED after
           two threads raced on it
  written  locals only: the element has been stored to in this launch (reading one that has not is undefined)
  writer / reader  race tracking (only on buffers `ownership.race_free` cannot clear): the thread that wrote / read
           each element since its workgroup's last BARRIER; reader -2 = several threads; on globals, -3 - g = threads
           of workgroup g whose accesses a BARRIER of g has ordered (a thread of another workgroup still races them)
  reader_group  globals only: the workgroup of the threads in `reader` (-2: several workgroups)
Each is allocated the first time something is recorded in it (None = all false; a cert of None: all EXACT).

An access (`Site`) is located once per LOAD/STORE: either a strided view that covers every lane (an affine index
whose every lane is in bounds: no gather, no scan) or one flat address per lane. Both feed `read`, `write` and
`elements` (explicit (lane, element) pairs, which only tracking and the uninitialised-local check need).

Race rule: two different threads touching one element, at least one of them writing, with no BARRIER of their
workgroup between, race. A BARRIER orders every access its workgroup's threads made before it, to locals and globals,
against every access they make after it (CUDA's __syncthreads); threads of different workgroups are never ordered
within a launch. What a race does:
  - two writes of different bits: undefined (UB.RACE, immediate), and the element is undefined;
  - two writes of the same bits (compared as unsigned integers of the element's size: NaN payloads and -0.0 count) are
    not a race: the element holds those bits, at the join of the writes' levels (once undefined it stays undefined);
  - a read and a write: the value read is undefined (UB.RACY_READ, deferred), whichever comes first; the write is
    defined.
Checks: a store finds another thread's write (write/write) or read (write after read) of the element, a load finds
another thread's write (read after write), and two lanes of one op touch one element. A read that came before its
racing write is known only at the write: the machine records the write (`LateWrites`) and runs the launch again, and
that run's load finds it.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from refimpl.dtype import DType
from refimpl.emulator.certainty import LEVEL
from refimpl.emulator.indexing import Grid

NOBODY, SEVERAL = -1, -2


def ordered(group):
  """The mark of accesses by threads of workgroup `group` that a BARRIER of that workgroup has ordered (globals)."""
  return -3 - group

def _marked_group(x: np.ndarray) -> np.ndarray:
  """The workgroup of each ordered mark in x (meaningless elsewhere)."""
  return -3 - x


_GLOBAL_BASE = (0,) * 6  # a global's flat address is the index itself

class Memory:
  """One buffer or local (see the module docstring)."""
  def __init__(self, name: str, dtype: DType, size: int, data: np.ndarray, grid: Grid, local: bool, tracked: bool,
               mutable: bool):
    self.name, self.dtype, self.size, self.data, self.local = name, dtype, size, data, local
    self.mutable = mutable  # stored to somewhere in the program: a value read from it must be a copy
    self.cert: np.ndarray | None = None
    self.written = np.zeros(data.size, dtype=bool) if local else None
    self.tracked = tracked
    self.writer = np.full(data.size, NOBODY, dtype=np.int64) if tracked else None
    self.reader = np.full(data.size, NOBODY, dtype=np.int64) if tracked else None
    self.reader_group = np.full(data.size, NOBODY, dtype=np.int64) if tracked and not local else None
    self.scratch: np.ndarray | None = None  # touched_twice's, one slot per element (its contents never matter)
    self.group_threads = grid.group  # threads per workgroup: a tracked thread's workgroup is its number // this
    # flat address = workgroup * size + index: the workgroup's coefficients on the six grid axes
    self.base_coef = (size * grid.sizes[1] * grid.sizes[2], size * grid.sizes[2], size, 0, 0, 0) if local else _GLOBAL_BASE

  def touched_twice(self, e: np.ndarray) -> bool:
    """Whether an element occurs twice among `e` (flat element addresses of one op): each occurrence writes its position
    into a scratch slot of its element, and an element met twice keeps only one of its positions (whichever: numpy
    leaves the order open), so another reads back a position not its own. Linear, where sorting is not."""
    flat = e.ravel()
    if flat.size < 2: return False
    if self.scratch is None: self.scratch = np.empty(self.data.size, dtype=np.int64)
    position = np.arange(flat.size)
    self.scratch[flat] = position
    return bool((self.scratch[flat] != position).any())

  def levels(self) -> np.ndarray:
    """The certainty levels, allocated (all EXACT) on first use."""
    if self.cert is None: self.cert = np.zeros(self.data.size, dtype=LEVEL)
    return self.cert

  def barrier(self, groups: np.ndarray | None, grid: Grid) -> None:
    """A barrier orders everything its workgroup did before it, in the workgroups of `grid` that reach it (`groups`:
    bool per workgroup of grid; None = all; a barrier inside a loop whose trip count depends on gidx is reached by some
    workgroups only). Locals (a block per workgroup): forget who touched what. Globals: the accesses of those
    workgroups' threads become ordered marks, which only a thread of another workgroup still races."""
    if not self.tracked: return
    if self.local:
      for a in (self.writer, self.reader):
        if groups is None: a.fill(NOBODY)
        else: a.reshape(-1, self.size)[groups] = NOBODY
      return
    w, r, rg = self.writer, self.reader, self.reader_group
    one_writer = (w >= 0) & _reached(w // self.group_threads, groups, grid)
    w[one_writer] = ordered(w[one_writer] // self.group_threads)
    one_group = (rg >= 0) & _reached(rg, groups, grid)
    r[one_group] = ordered(rg[one_group])


def _reached(group: np.ndarray, groups: np.ndarray | None, grid: Grid) -> np.ndarray:
  """Whether each workgroup (launch numbers) is one of `grid`'s that reach a barrier (`groups`, see Memory.barrier)."""
  k = group - grid.first_group
  inside = (k >= 0) & (k < grid.workgroups)
  if groups is None: return inside
  return inside & groups[np.clip(k, 0, grid.workgroups - 1)]


class Site(NamedTuple):
  """Where one LOAD/STORE lands. `live` (None = every lane) are the lanes that access memory. Either `view` =
  (coefficients on the grid axes, offset) of the flat address, valid on every lane, or `addr` = the flat address per
  lane ((lanes,) or (1,) when uniform; 0 on lanes that are not live). `count` elements per lane (a vector access)."""
  mem: Memory
  count: int
  live: np.ndarray | None
  view: tuple[tuple[int, ...], int] | None = None
  addr: np.ndarray | None = None

  def strided(self, flat: np.ndarray, grid: Grid) -> np.ndarray:
    """The view as a numpy array of shape grid.shape (+ (count,)) into `flat` (writable: it aliases memory)."""
    return strided(flat, self.view, self.count, grid)

  def tail(self) -> tuple[int, ...]: return (self.count,) if self.count > 1 else ()


def strided(flat: np.ndarray, view: tuple[tuple[int, ...], int], count: int, grid: Grid) -> np.ndarray:
  """Site.strided of a site with that view and count."""
  coef, off = view
  it = flat.itemsize
  shape = grid.shape + ((count,) if count > 1 else ())
  strides = tuple(c * it for c in grid.strides(coef)) + ((it,) if count > 1 else ())
  return np.ndarray(shape, flat.dtype, buffer=flat, offset=off * it, strides=strides)

def read(flat: np.ndarray, site: Site, grid: Grid, snapshot: bool) -> np.ndarray:
  """The elements each lane reads from `flat` (data or certainty levels): shape (lanes,) or (1,) (+ (count,)). Lanes that are not
  live read something harmless. snapshot: never return a view of `flat` (it will change later)."""
  if site.view is not None: return read_view(flat, site.view, site.count, grid, snapshot)
  a = site.addr
  return flat[a] if site.count == 1 else flat[a[:, None] + np.arange(site.count)]

def read_view(flat: np.ndarray, view: tuple[tuple[int, ...], int], count: int, grid: Grid, snapshot: bool) -> np.ndarray:
  """`read` of a site whose address is view = (coefficients, offset) on every lane: one row where that is the same on
  every lane; a view of flat where consecutive lanes are one stride apart (`lane_view`); else a copy, laid out so
  that each element of a vector is contiguous across the lanes (a GEP of it is then a view)."""
  coef, off = view
  if not any(coef): out = flat[off:off + count].reshape((1, count) if count > 1 else (1,))
  else:
    out = lane_view(flat, view, count, grid)
    if out is None:
      box = strided(flat, view, count, grid)
      if count == 1: return box.reshape(grid.lanes)  # a copy: no one stride fits the lanes
      copy = np.empty((count,) + grid.shape, flat.dtype)
      np.copyto(copy, box.transpose((box.ndim - 1, *range(box.ndim - 1))))  # the vector's elements first
      return copy.reshape(count, grid.lanes).T
  return out.copy() if snapshot else out

def lane_view(flat: np.ndarray, view: tuple[tuple[int, ...], int], count: int, grid: Grid) -> np.ndarray | None:
  """The `count` elements from flat address view = (coefficients, offset) on each lane, as a (lanes,) (+ (count,)) view
  of flat where consecutive lanes are one stride apart (Grid.lane_stride), else None."""
  stride = grid.lane_stride(view[0])
  if stride is None: return None
  it = flat.itemsize
  if count == 1: return np.ndarray((grid.lanes,), flat.dtype, flat, view[1] * it, (stride * it,))
  return np.ndarray((grid.lanes, count), flat.dtype, flat, view[1] * it, (stride * it, it))

def write(flat: np.ndarray, site: Site, grid: Grid, values: np.ndarray) -> None:
  """Stores `values` (shape (lanes,) or (1,), + (count,)) into `flat` on the live lanes."""
  tail = site.tail()
  if site.view is not None and grid.lanes == 1:  # one lane: its elements start at the offset
    if site.live is None or site.live.reshape(-1)[0]: flat[site.view[1]:site.view[1] + site.count] = values.reshape(-1)
    return
  if site.view is not None and site.live is None:
    lanes = lane_view(flat, site.view, site.count, grid)
    if lanes is not None:
      lanes[...] = values
      return
  if site.view is not None:
    view = site.strided(flat, grid)
    lead = grid.shape if values.shape[0] == grid.lanes and grid.lanes > 1 else (1,) * len(grid.shape)
    v = values.reshape(lead + tail)
    if site.live is None: view[...] = v
    else: np.copyto(view, v, where=site.live.reshape(grid.shape + (1,) * len(tail)))
    return
  lanes = grid.ids if site.live is None else np.flatnonzero(site.live)
  a = np.broadcast_to(site.addr, (grid.lanes,))[lanes]
  v = values[lanes] if values.shape[0] == grid.lanes else np.broadcast_to(values, (len(lanes),) + tail)
  if site.count == 1: flat[a] = v
  else: flat[a[:, None] + np.arange(site.count)] = v

def elements(site: Site, grid: Grid) -> tuple[np.ndarray, np.ndarray]:
  """(lanes (L,), flat element addresses (L, count)) of the live lanes, lanes ascending."""
  a = grid.evaluate(*site.view) if site.view is not None else site.addr
  a = np.broadcast_to(a, (grid.lanes,))
  lanes = grid.ids if site.live is None else np.flatnonzero(site.live)
  return lanes, a[lanes][:, None] + np.arange(site.count)


# ***** race tracking *****

def as_bits(x: np.ndarray) -> np.ndarray:
  """x's elements as unsigned integers of their size: equal exactly where the bits are (a NaN's payload, -0.0 and +0.0
  differ)."""
  return x.view(np.dtype(f"u{x.dtype.itemsize}"))

def _shared(mem: Memory, e: np.ndarray, lanes: np.ndarray, bits: np.ndarray | None = None,
            repeated: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
  """Within one op on `mem`, per element of e (L, count): whether another lane of the op touches it too, whether two
  lanes of the op write different `bits` (L, count) to it, and there the nearest lane (by bits, then lane) whose bits
  differ. `repeated`: mem.touched_twice(e), when the caller knows it already."""
  if not (mem.touched_twice(e) if repeated is None else repeated):  # no element touched twice: nothing to look for
    return np.zeros(e.shape, bool), np.zeros(e.shape, bool), np.full(e.shape, NOBODY, dtype=np.int64)
  flat_e = e.ravel()
  flat_l = np.repeat(lanes, e.shape[1])
  flat_b = np.zeros(flat_e.size, np.uint8) if bits is None else bits.ravel()
  order = np.lexsort((flat_l, flat_b, flat_e))  # by element, then bits, then lane
  se, sl, sb = flat_e[order], flat_l[order], flat_b[order]
  new_e = np.r_[True, se[1:] != se[:-1]]
  start = np.flatnonzero(new_e)
  last = np.r_[start[1:] - 1, len(se) - 1]
  group = np.cumsum(new_e) - 1
  touched = (np.minimum.reduceat(sl, start) != np.maximum.reduceat(sl, start))[group]
  differ = touched & (sb[start] != sb[last])[group]
  runs = np.flatnonzero(new_e | np.r_[True, sb[1:] != sb[:-1]])  # where each run of one element and bits starts
  run = np.cumsum(new_e | np.r_[True, sb[1:] != sb[:-1]]) - 1
  after = np.r_[runs[1:], len(se)][run]  # the first entry of the next run (another element's where this run is last)
  nxt = np.minimum(after, len(se) - 1)
  other = np.where((after < len(se)) & (se[nxt] == se), sl[nxt], sl[np.maximum(runs[run] - 1, 0)])
  out = [np.empty(flat_e.size, bool), np.empty(flat_e.size, bool), np.empty(flat_e.size, np.int64)]
  for a, x in zip(out, (touched, differ, other)): a[order] = x
  return tuple(a.reshape(e.shape) for a in out)

def _unordered(earlier: np.ndarray, ln: np.ndarray, group: np.ndarray) -> np.ndarray:
  """Whether an earlier access (a thread, or an ordered mark) is unordered with thread ln of workgroup `group`: another
  thread with no barrier between, or the ordered accesses of another workgroup."""
  return ((earlier >= 0) & (earlier != ln)) | ((earlier <= -3) & (_marked_group(earlier) != group))

class StoreRaces(NamedTuple):
  """What a store met (each (L, count) over its lanes' elements): `bad` the elements where it races another write
  (different bits: RACE) and `other` the thread it races there; `earlier` the elements another thread wrote before
  with no barrier between, `shared` those another lane of the op writes too (both: the element holds the join of the
  writes' levels); `late` the elements another thread read before with no barrier between (that read's value is
  undefined)."""
  bad: np.ndarray
  other: np.ndarray
  earlier: np.ndarray
  shared: np.ndarray
  late: np.ndarray

def track_store(mem: Memory, lanes: np.ndarray, e: np.ndarray, bits: np.ndarray) -> StoreRaces:
  """Records a store by `lanes` of `bits` (L, count; as_bits of the values) to elements `e` (before memory is written:
  an earlier unordered write's bits are still there)."""
  ln = lanes[:, None]
  group = ln // mem.group_threads
  w, r = mem.writer[e], mem.reader[e]
  ww = _unordered(w, ln, group)
  clash = ww & (bits != as_bits(mem.data[e]))
  dup, dup_clash, dup_other = _shared(mem, e, lanes, bits)
  late = (r == SEVERAL) | _unordered(r, ln, group)
  mem.writer[e] = ln
  return StoreRaces(clash | dup_clash, np.where(clash, w, dup_other), ww, dup, late)

def join_met_levels(mem: Memory, e: np.ndarray, races: StoreRaces, new: np.ndarray, before: np.ndarray | None) -> None:
  """After a store wrote levels `new` (L, count) at e: an element that unordered writes reached holds the join of
  their levels: of every lane of the op that wrote it, and where another thread's write came earlier, of the element's
  level `before` the op (None: EXACT)."""
  met = races.earlier | races.shared
  if not met.any(): return
  level = new if before is None else np.where(races.earlier, np.maximum(new, before), new)
  np.maximum.at(mem.levels(), e[met], level[met])

def track_load(mem: Memory, lanes: np.ndarray, e: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
  """Records a load by `lanes` of elements `e`; returns race check -> (bad elements, the thread that wrote them)."""
  ln = lanes[:, None]
  group = ln // mem.group_threads
  w, r = mem.writer[e], mem.reader[e]
  raw = _unordered(w, ln, group)
  mine = (r == NOBODY) | (r == ln) | (r == ordered(group))  # nothing unordered read it but this thread
  mem.reader[e] = np.where(mine, ln, SEVERAL)
  repeated = mem.touched_twice(e)
  dup, _, _ = _shared(mem, e, lanes, repeated=repeated)
  mem.reader[e[dup]] = SEVERAL
  if mem.reader_group is not None: _track_reader_group(mem, e, np.broadcast_to(group, e.shape), repeated)
  return {"read after write": (raw, w)}

def _track_reader_group(mem: Memory, e: np.ndarray, group: np.ndarray, repeated: bool) -> None:
  """The workgroup of each element's readers after a load by threads of `group` (several workgroups: SEVERAL);
  `repeated`: whether the load touches an element twice (else each element has its one reader's group)."""
  if not repeated:
    before = mem.reader_group[e]
    mem.reader_group[e] = np.where((before == NOBODY) | (before == group), group, SEVERAL)
    return
  touched, at = np.unique(e.ravel(), return_inverse=True)
  lo, hi = np.full(len(touched), np.iinfo(np.int64).max), np.full(len(touched), -1)
  np.minimum.at(lo, at, group.ravel())
  np.maximum.at(hi, at, group.ravel())
  before = mem.reader_group[touched]
  one = (lo == hi) & ((before == NOBODY) | (before == lo))
  mem.reader_group[touched] = np.where(one, lo, SEVERAL)


class LateWrites:
  """The writes that met an earlier read by another thread with no barrier between (write after read), found by the
  runs of one launch so far: per memory name, rows (element in the launch, writer thread, its workgroup, that
  workgroup's barrier count at the write; 0 where barriers do not order the memory). A read of such an element by
  another thread races the write when nothing orders them: the reader is of another workgroup (a global), or of the
  same one at the same barrier count (`racy`)."""
  def __init__(self) -> None:
    self.rows: dict[str, np.ndarray] = {}
    self._tables: dict[str, tuple] = {}

  def learn(self, found: dict[str, list[np.ndarray]]) -> bool:
    """Adds the rows a run found (per memory name, arrays of shape (n, 4)); whether any of them is new."""
    new = False
    for name, parts in found.items():
      old = self.rows.get(name, np.empty((0, 4), np.int64))
      rows = np.unique(np.concatenate([old, *parts]), axis=0)
      if len(rows) > len(old):
        self.rows[name], new = rows, True
        self._tables.pop(name, None)
    return new

  def _table(self, name: str) -> tuple:
    """(the span of barrier counts, sorted element * span + count keys with the lowest and highest writer there, sorted
    elements with their lowest and highest writing workgroup and a writer of each), made once per set of rows."""
    if name not in self._tables:
      x, w, g, b = self.rows[name].T
      span = int(b.max()) + 1
      keys, at = np.unique(x * span + b, return_inverse=True)
      lo, hi = np.full(len(keys), np.iinfo(np.int64).max), np.full(len(keys), -1)
      np.minimum.at(lo, at, w)
      np.maximum.at(hi, at, w)
      order = np.lexsort((g, x))
      xs, gs, ws = x[order], g[order], w[order]
      first = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
      last = np.r_[first[1:] - 1, len(xs) - 1]
      self._tables[name] = (span, keys, lo, hi, xs[first], gs[first], ws[first], gs[last], ws[last])
    return self._tables[name]

  def racy(self, name: str, x: np.ndarray, t: np.ndarray, g: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a read of elements x (L, count) by threads t of workgroups g at barrier counts b (each (L,)): whether a
    recorded write races it, and that write's thread."""
    if name not in self.rows: return np.zeros(x.shape, bool), np.zeros(x.shape, np.int64)
    span, keys, lo, hi, xs, glo, wglo, ghi, wghi = self._table(name)
    t, g, b = t[:, None], g[:, None], b[:, None]
    k = x * span + b
    at = np.minimum(np.searchsorted(keys, k), len(keys) - 1)
    same = (b < span) & (keys[at] == k) & ((lo[at] != t) | (hi[at] != t))
    at2 = np.minimum(np.searchsorted(xs, x), len(xs) - 1)
    cross = (xs[at2] == x) & ((glo[at2] != g) | (ghi[at2] != g))
    writer = np.where(same, np.where(lo[at] != t, lo[at], hi[at]), np.where(glo[at2] != g, wglo[at2], wghi[at2]))
    return same | cross, writer
