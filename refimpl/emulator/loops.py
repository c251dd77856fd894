"""Loops that run as lanes: which RANGEs the emulator may run with every iteration at once, and the in-order fold.

The rule of a RANGE is sequential: its body runs for start, start + 1, ..., end - 1 in turn (machine.py). When no
iteration can observe another, running them all at once, each iteration one more lane like a thread, computes the
same thing. `lane_loops(program, infos)` finds the RANGEs where that is provably so:

  parallel  nothing is carried from one iteration to the next:
              - no ASSIGN in the body writes an accumulator defined before the loop;
              - no uop after the loop reads a value made in the body;
              - no BARRIER in the body;
              - every buffer (or local) the body stores to is accessed in the body only through affine indices that
                agree on every term but this loop's counter and the counters of loops nested in it, and one iteration's
                elements, over those nested counters, constants and vector widths, are fewer than the counter's
                coefficient: so each iteration has its own elements of that buffer, and no iteration reads what
                another one wrote.
  scan      the same, except that accumulators defined before the loop are carried, each one only as a chain
            acc = acc OP t1 OP t2 ... (OP one of ADD MUL MAX AND OR XOR, acc on either side of each OP) in ASSIGNs
            directly in the body, where no term depends on an accumulator of the loop and acc is read nowhere else
            in the body. A select chain, acc = WHERE(CMPLT(p, q), q, p) with acc as p or q (tinygrad's max where the
            renderer has no MAX), is a chain of that pair of rules (scan op WHERE). The terms of every iteration
            are computed at once; `fold` then applies the chain's OP to the accumulator and the terms in program
            order (iteration by iteration, term by term), exactly as the sequential rule would, with alu's rule for
            every step.
Everything else runs sequentially.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from refimpl.dtype import DType
from refimpl.emulator import alu, certainty
from refimpl.emulator.certainty import Certainty, of_loose
from refimpl.emulator.indexing import IntInfo, thread_form
from refimpl.emulator.ub import UB
from refimpl.ir import GroupOp, Ops, Program

SCAN_OPS = (Ops.ADD, Ops.MUL, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR, Ops.WHERE)  # WHERE: a select chain (`_select`)
# from this many elements per step on, one ufunc call per step beats `accumulate` along axis 0 (one inner loop per lane)
ROW_STEPS_FROM = 256
TRANSPOSE_BLOCK = 256  # lanes per block of `steps_first`'s copy
# the most elements of numpy's ufunc buffer while fold_outer runs (numpy's default, 8192): it takes the tile's inner runs,
# where one operand is broadcast (stride 0), through its buffer when they are shorter than about half the buffer
# (measured: numpy 2.4, a 256 x 256 outer-product multiply 2.5x slower), so fold_outer asks for twice its run, and no
# less than a sixteenth of it (far smaller buffers are slow too)
TILE_BUFFER = 8192
TILE_BLOCK = 1 << 16  # elements of a tile that fold_outer folds to the end at a time (with its products: 512 KB of float32)
TILE_PRODUCTS = 1 << 20  # elements: the most a block's products made ahead of their steps may take (loops._stepped)


@dataclass(frozen=True)
class Step:
  """One update of an accumulator: acc = node(acc, term), or node(term, acc) when not acc_first. A select step,
  node(p, q) = WHERE(CMPLT(p, q), q, p), has its CMPLT in `compare`. `product`: the operands of a term the fold may
  compute itself, step by step (`_products`), instead of the body computing it for every iteration at once."""
  node: int
  term: int
  acc_first: bool
  compare: int | None = None
  product: tuple[int, int] | None = None

@dataclass(frozen=True)
class Scan:
  """An accumulator a scan loop carries: its chain op and the steps of one iteration, in program order."""
  acc: int
  op: Ops
  steps: tuple[Step, ...]

@dataclass(frozen=True)
class TileStep:
  """One step of every chain of an OuterProduct tile: accumulator (r, c) is chained with the product of operands
  rows[r] and cols[c] (keys that are one for GEPs and ALU ops of the same operands: `_outer_product`), the row's
  operand first where row_first[r * cols + c]."""
  rows: tuple[Any, ...]
  cols: tuple[Any, ...]
  row_first: tuple[bool, ...]

@dataclass(frozen=True)
class MemoryOperands:
  """An OuterProduct whose every operand is element k of a LOAD made directly in the loop's body (GEP k of a vector
  LOAD, or a scalar LOAD: k = 0), a LOAD that nothing but the tile's products reads (itself or through GEPs that only
  they read). sources[s]: the (LOAD, k) of each row's and of each column's operand in tile step s. `ops`: those LOADs
  and GEPs, which a fold that reads the operands from memory itself (blocks._memory_tile) lets the body skip."""
  sources: tuple[tuple[tuple[tuple[int, int], ...], tuple[tuple[int, int], ...]], ...]
  ops: frozenset[int]
  loads: tuple[int, ...]

@dataclass(frozen=True)
class OuterProduct:
  """Scans of one loop whose folds may run together (`fold_outer`): a tile of len(steps[0].rows) x len(steps[0].cols)
  accumulators, scan `scans[r * cols + c]` (an index into LaneLoop.scans) at (r, c), whose chains have one op and one
  dtype, and whose every step is a product (Step.product) of an operand its row shares with one its column shares
  (tinygrad's upcast matmul). `memory`: where every operand is an element of a LOAD (MemoryOperands), else None."""
  scans: tuple[int, ...]
  steps: tuple[TileStep, ...]
  memory: MemoryOperands | None = None

@dataclass(frozen=True)
class LaneLoop:
  """A RANGE that may run as lanes: the accumulators it carries (none: a parallel loop), the uops a lane run leaves to
  `fold` (the chains' nodes and ASSIGNs), and its lane order (Grid.extend). A scan whose every term is computed by an
  ALU op in the body runs iteration-major, so the fold reads each iteration's terms as one contiguous row; other
  loops run lane-major, so a load that streams along the counter stays a view of memory (no copy). `outer`: the
  scans whose folds may run as one tile (`OuterProduct`), or None. `nested`: for a loop whose accumulators are carried
  only by the chains of the one loop its body ends with (`_nested_loop`), that inner RANGE; its scans are these."""
  scans: tuple[Scan, ...]
  folded: frozenset[int]
  iteration_major: bool = False
  outer: OuterProduct | None = None
  nested: int | None = None


def lane_loops(program: Program, infos: dict[int, IntInfo]) -> dict[int, LaneLoop]:
  """RANGE uop -> LaneLoop for every loop that may run as lanes (see the module docstring)."""
  uops, ends, opened = program.uops, {}, []
  for i, u in enumerate(uops):
    if u.op in GroupOp.BlockStart: opened.append(i)
    elif u.op in GroupOp.BlockEnd: ends[opened.pop()] = i
  users: dict[int, list[int]] = {}
  for j, u in enumerate(uops):
    for s in u.src: users.setdefault(s, []).append(j)
  out = {}
  for i, u in enumerate(uops):
    if u.op is not Ops.RANGE: continue
    loop = _lane_loop(program, infos, i, ends, users)
    if loop is not None: out[i] = loop
  for i in reversed(range(len(uops))):  # an inner loop first, so that a nest of them flattens from the inside
    if uops[i].op is Ops.RANGE and i not in out:
      loop = _nested_loop(program, infos, i, ends, out)
      if loop is not None: out[i] = loop
  return out


def _lane_loop(program: Program, infos: dict[int, IntInfo], i: int, ends: dict[int, int],
               users: dict[int, list[int]]) -> LaneLoop | None:
  uops, end = program.uops, ends[i]
  body = range(i + 1, end)
  if any(uops[j].op is Ops.BARRIER for j in body): return None
  carried = {uops[j].src[0] for j in body if uops[j].op is Ops.ASSIGN and uops[j].src[0] < i}
  for k in range(end + 1, len(uops)):  # values made in the body are dead after it (a carried register is not)
    for s in uops[k].src:
      if s == i and k != end: return None  # the counter itself
      if i < s < end and not (uops[s].op is Ops.ASSIGN and uops[s].src[0] in carried): return None
  if not _iterations_disjoint(program, infos, i, end, ends): return None
  scans = []
  for acc in sorted(carried):
    scan = _scan(program, i, end, acc, carried, ends, users)
    if scan is None: return None
    scans.append(_products(program, infos, i, end, ends, users, scan))
  folded = {s.node for scan in scans for s in scan.steps} | {s.compare for scan in scans for s in scan.steps if s.compare}
  folded |= {j for j in body if uops[j].op is Ops.ASSIGN and uops[j].src[0] in carried}
  folded |= {s.term for scan in scans for s in scan.steps if s.product is not None}
  computed = all(uops[s.term].op in GroupOp.ALU and i < s.term < end for scan in scans for s in scan.steps)
  tile = _outer_product(program, scans)
  if tile is not None: tile = replace(tile, memory=_memory_operands(program, i, end, ends, users, scans, tile))
  return LaneLoop(tuple(scans), frozenset(folded), bool(scans) and computed, tile)


def _nested_loop(program: Program, infos: dict[int, IntInfo], i: int, ends: dict[int, int],
                 inner_loops: dict[int, LaneLoop]) -> LaneLoop | None:
  """RANGE i as lanes together with the loop j its body ends with (tinygrad's reductions over two axes: a batch loop
  around a row loop), where j is a scan of constant bounds (at least two iterations) whose every accumulator is
  defined before i, carried by a chain whose rule is one numpy ufunc (alu.ufunc_rule: defined everywhere, so the fold
  finds nothing), and read nowhere else in i's body; i's body before j makes no block, ASSIGN, STORE or BARRIER; no
  value of i's body is read after it but the chains' ASSIGNs; and i's iterations store to elements of their own.
  The sequential order of every chain is then (i's counter, j's counter, step), so one fold over i * j iterations,
  both axes lane-major (a thread's iterations consecutive, j's inside i's), keeps it."""
  uops, end = program.uops, ends[i]
  j = i + 1 + next((k for k, u in enumerate(uops[i + 1:end]) if u.op is Ops.RANGE), end)
  inner = inner_loops.get(j)
  if inner is None or ends.get(j) != end - 1 or inner.nested is not None or inner.outer is not None or not inner.scans:
    return None
  if any(uops[s].op is not Ops.CONST for s in uops[j].src) or uops[uops[j].src[1]].arg - uops[uops[j].src[0]].arg < 2:
    return None
  if any(uops[k].op in (Ops.ASSIGN, Ops.STORE, Ops.BARRIER, Ops.IF, Ops.RANGE) for k in range(i + 1, j)): return None
  if any(uops[k].op is Ops.BARRIER for k in range(j + 1, end)): return None
  accs = {scan.acc for scan in inner.scans}
  dt = [uops[scan.steps[0].node].dtype.scalar() for scan in inner.scans]
  if any(a >= i for a in accs) or any(alu.ufunc_rule(scan.op, d) is None for scan, d in zip(inner.scans, dt)): return None
  chain = {k for k in range(j + 1, end) if uops[k].op is Ops.ASSIGN and uops[k].src[0] in accs} | accs
  if any(s in chain for k in range(i + 1, j) for s in uops[k].src): return None
  for k in range(end + 1, len(uops)):  # values made in the body are dead after it (a chain's ASSIGN is not)
    for s in uops[k].src:
      if s == i and k != end: return None
      if i < s < end and not (uops[s].op is Ops.ASSIGN and uops[s].src[0] in accs): return None
  if not _iterations_disjoint(program, infos, i, end, ends): return None
  return LaneLoop(inner.scans, inner.folded, False, None, j)


def _iterations_disjoint(program: Program, infos: dict[int, IntInfo], i: int, end: int, ends: dict[int, int]) -> bool:
  """Each buffer the body of RANGE i stores to: every access in the body is affine, they agree on every term but the
  counters of i and of the loops inside it, and no element is reached in two iterations (`_apart`)."""
  uops = program.uops
  inner = {j for j in range(i + 1, end) if uops[j].op is Ops.RANGE}
  access = [j for j in range(i + 1, end) if uops[j].op in (Ops.LOAD, Ops.STORE)]
  stored = {uops[uops[j].src[0]].src[0] for j in access if uops[j].op is Ops.STORE}
  trips = infos[i].hi - infos[i].lo + 1
  for buf in stored:
    shape, step, parts = None, None, []
    for j in access:
      buf_j, idx = uops[uops[j].src[0]].src
      if buf_j != buf: continue
      info = infos.get(idx)
      if info is None or info.aff is None: return False
      coef, loops, const = thread_form(info.aff)
      if any(r in inner and r not in infos for r, _ in loops): return False
      fixed = (coef, tuple(sorted((r, k) for r, k in loops if r != i and r not in inner)))
      if shape is None: shape, step = fixed, dict(loops).get(i, 0)
      elif fixed != shape or dict(loops).get(i, 0) != step: return False
      count = uops[j].dtype.count if uops[j].op is Ops.LOAD else uops[uops[j].src[1]].dtype.count
      parts.append((const, [(k, infos[r].lo, infos[r].hi) for r, k in loops if r in inner], count))
    if not step or not _apart(parts, abs(step), trips): return False
  return True


def _apart(parts: list[tuple[int, list[tuple[int, int, int]], int]], step: int, trips: int) -> bool:
  """Whether the offsets one iteration reaches, shifted by step per iteration, never meet across `trips` iterations.
  parts: per access (constant, (coefficient, lo, hi) of each inner counter, elements). Exact when the offsets are few
  enough to list; otherwise their hull must be narrower than the step."""
  if math.prod(hi - lo + 1 for part in parts for _, lo, hi in part[1]) * sum(p[2] for p in parts) > 4096:
    lo = min(c + sum(min(k * a, k * b) for k, a, b in terms) for c, terms, _ in parts)
    hi = max(c + sum(max(k * a, k * b) for k, a, b in terms) + n - 1 for c, terms, n in parts)
    return hi - lo < step
  offsets: set[int] = set()
  for const, terms, count in parts:
    sums = {const}
    for k, a, b in terms: sums = {x + k * v for x in sums for v in range(a, b + 1)}
    offsets |= {x + w for x in sums for w in range(count)}
  by_residue: dict[int, list[int]] = {}
  for x in sorted(offsets): by_residue.setdefault(x % step, []).append(x)
  return all(b - a >= step * trips for xs in by_residue.values() for a, b in itertools.pairwise(xs))


def _scan(program: Program, i: int, end: int, acc: int, carried: set[int], ends: dict[int, int],
          users: dict[int, list[int]]) -> Scan | None:
  """The chain by which loop i carries accumulator `acc`, or None when it is carried any other way."""
  uops = program.uops
  depth = _depths(program, i, end, ends)
  assigns = [j for j in range(i + 1, end) if uops[j].op is Ops.ASSIGN and uops[j].src[0] == acc]
  if any(depth[j] != 0 for j in assigns): return None
  roots = {acc, *assigns}
  dependent = _dependent(program, i, end, carried)
  op, steps, chained = None, [], set()
  for a in assigns:
    node, chain = uops[a].src[1], []
    while node not in roots:
      u = uops[node]
      select = _select(uops, node, users)
      if u.op is Ops.WHERE and select is None: return None
      if not i < node < end or u.op not in SCAN_OPS or (op is not None and u.op is not op): return None
      if len(users.get(node, ())) != 1: return None
      op = u.op
      p, q = select[:2] if select else u.src
      p_acc, q_acc = p in roots or p in dependent, q in roots or q in dependent
      if p_acc == q_acc: return None
      term = q if p_acc else p
      if term in dependent or term in carried: return None
      chain.append(Step(node, term, p_acc, select[2] if select else None))
      chained.update((node, select[2]) if select else (node,))
      node = p if p_acc else q
    steps.extend(reversed(chain))
  for r in roots:  # the accumulator is read in the body only by its chain
    if any(i < k < end and k not in chained and k not in assigns for k in users.get(r, ())): return None
  return Scan(acc, op if op is not None else Ops.ADD, tuple(steps))


def _products(program: Program, infos: dict[int, IntInfo], i: int, end: int, ends: dict[int, int],
              users: dict[int, list[int]], scan: Scan) -> Scan:
  """The scan with the steps whose term the fold may compute itself marked (Step.product): a MUL made directly in loop
  i's body, used by its step only, not an index form, where the MUL's rule and the chain op's are numpy ufuncs
  (alu.ufunc_rule). The fold then makes each iteration's product just before the step that adds it."""
  uops = program.uops
  dt = uops[scan.steps[0].node].dtype.scalar() if scan.steps else None
  if dt is None or alu.ufunc_rule(scan.op, dt) is None or alu.ufunc_rule(Ops.MUL, dt) is None: return scan
  depth = _depths(program, i, end, ends)
  def fused(s: Step) -> bool:
    return (uops[s.term].op is Ops.MUL and i < s.term < end and depth[s.term] == 0 and users.get(s.term) == [s.node]
            and getattr(infos.get(s.term), "aff", None) is None)
  return replace(scan, steps=tuple(replace(s, product=uops[s.term].src) if fused(s) else s for s in scan.steps))


def _outer_product(program: Program, scans: Sequence[Scan]) -> OuterProduct | None:
  """The loop's scans as one OuterProduct tile when every one of them has the shape its docstring gives (at least two
  accumulators); the tile's rows and columns are the distinct first and second operands of the first step."""
  uops = program.uops
  if len(scans) < 2 or any(not scan.steps or not all(s.product for s in scan.steps) for scan in scans): return None
  if len({(scan.op, len(scan.steps), uops[scan.steps[0].node].dtype) for scan in scans}) != 1: return None
  @functools.cache
  def same(j: int) -> Any:  # one key for uops that are one value: the same GEP or ALU op of the same operands
    u = uops[j]
    return (u.op, u.dtype, u.arg, *map(same, u.src)) if u.op in GroupOp.ALU or u.op is Ops.GEP else j
  def operands(step: Step) -> tuple[Any, Any]: return same(step.product[0]), same(step.product[1])
  first = {operands(scan.steps[0]): k for k, scan in enumerate(scans)}
  xs, ys = list(dict.fromkeys(x for x, _ in first)), list(dict.fromkeys(y for _, y in first))
  if len(first) != len(scans) or len(xs) * len(ys) != len(scans): return None
  tile = tuple(first[(x, y)] for x in xs for y in ys)
  steps = []
  for s in range(len(scans[0].steps)):
    step = _tile_step([operands(scans[k].steps[s]) for k in tile], len(xs), len(ys))
    if step is None: return None
    steps.append(TileStep(*step))
  return OuterProduct(tile, tuple(steps))


def _tile_step(pairs: list[tuple[Any, Any]], rows: int, cols: int) -> tuple[tuple, tuple, tuple[bool, ...]] | None:
  """(row operands, column operands, row_first) such that pairs[r * cols + c] is (rows[r], cols[c]) or the other way
  round, or None. Row 0's operand is one of pair (0, 0)'s: each choice fixes the columns' and so the other rows'."""
  def other(pair: tuple[Any, Any], x: Any) -> Any: return pair[1] if pair[0] == x else pair[0] if pair[1] == x else None
  for r0 in dict.fromkeys(pairs[0]):
    col_ops = [other(pairs[c], r0) for c in range(cols)]
    row_ops = [other(pairs[r * cols], col_ops[0]) for r in range(rows)] if col_ops[0] is not None else [None]
    if None in col_ops or None in row_ops: continue
    if all(pairs[r * cols + c] in ((row_ops[r], col_ops[c]), (col_ops[c], row_ops[r])) for r in range(rows) for c in range(cols)):
      return tuple(row_ops), tuple(col_ops), tuple(pairs[r * cols + c][0] == row_ops[r] for r in range(rows) for c in range(cols))
  return None


def _memory_operands(program: Program, i: int, end: int, ends: dict[int, int], users: dict[int, list[int]],
                     scans: Sequence[Scan], tile: OuterProduct) -> MemoryOperands | None:
  """The tile's MemoryOperands when its operands have that shape (see its docstring), else None."""
  uops, depth = program.uops, _depths(program, i, end, ends)
  terms = {s.term for k in tile.scans for s in scans[k].steps}
  def source(j: int) -> tuple[int, int] | None:
    u = uops[j]
    if u.op is Ops.GEP and len(u.arg) == 1 and uops[u.src[0]].op is Ops.LOAD and uops[u.src[0]].dtype.count > 1:
      return u.src[0], u.arg[0]
    return (j, 0) if u.op is Ops.LOAD and u.dtype.count == 1 else None
  operands = {j for k in tile.scans for s in scans[k].steps for j in s.product}
  found = {j: source(j) for j in operands}
  if None in found.values(): return None
  loads = {load for load, _ in found.values()}
  ops = frozenset(operands | loads)
  if any(not i < j < end or depth[j] != 0 for j in ops): return None
  if any(not set(users.get(j, ())) <= (terms if j in operands else ops) for j in ops): return None
  cols = len(tile.steps[0].cols)
  def pair(k: int, s: int, row: bool) -> tuple[int, int]:
    step, first = scans[tile.scans[k]].steps[s], tile.steps[s].row_first[k]
    return found[step.product[0 if first == row else 1]]
  rows = len(tile.steps[0].rows)
  sources = tuple((tuple(pair(r * cols, s, True) for r in range(rows)), tuple(pair(c, s, False) for c in range(cols)))
                  for s in range(len(tile.steps)))
  return MemoryOperands(sources, ops, tuple(sorted(loads)))


def _select(uops, node: int, users: dict[int, list[int]]) -> tuple[int, int, int] | None:
  """(p, q, the CMPLT) when uop `node` is WHERE(CMPLT(p, q), q, p) and the WHERE is its CMPLT's only user."""
  u = uops[node]
  if u.op is not Ops.WHERE: return None
  c, q, p = u.src
  if uops[c].op is not Ops.CMPLT or uops[c].src != (p, q) or users.get(c) != [node]: return None
  return p, q, c


def _depths(program: Program, i: int, end: int, ends: dict[int, int]) -> dict[int, int]:
  """How many blocks inside loop i's body each body uop is nested in (0: directly in the body; a block's own start
  and end uops count as outside it)."""
  out, open_ends = {}, []
  for j in range(i + 1, end):
    if open_ends and j == open_ends[-1]: open_ends.pop()
    out[j] = len(open_ends)
    if j in ends: open_ends.append(ends[j])
  return out


def _dependent(program: Program, i: int, end: int, carried: set[int]) -> set[int]:
  """The body uops whose value depends on a carried accumulator (through any chain of sources)."""
  uops, dep = program.uops, set()
  for j in range(i + 1, end):
    if any(s in carried or s in dep for s in uops[j].src): dep.add(j)
  return dep


# ***** the fold *****

@dataclass(frozen=True)
class Product:
  """A chain step's term the fold computes itself (Step.product): fn(a, b), fn the MUL's ufunc rule, a and b its exact
  operands as (n iterations, L, *vec) views (`iterations`) or as the loop's values (n * L lanes, or one row)."""
  fn: np.ufunc
  a: np.ndarray
  b: np.ndarray


@dataclass
class Folded:
  """The accumulator after a fold, per outer lane, with the certainty levels the fold's own steps give it (the
  accumulator's and the terms' levels are the caller's to join); `undefined_step`: the first step in order that alu
  leaves undefined on some lane, as (step, lane, kind, reason, operands), or None."""
  values: np.ndarray
  cert: np.ndarray | None
  undefined_step: tuple[int, int, UB, str, tuple] | None = None


def fold(op: Ops, dtype: DType, acc: np.ndarray, lane_terms: np.ndarray, acc_first: Sequence[bool]) -> Folded:
  """acc (L, *vec) OP'd with the terms (L, S, *vec) in order s = 0 .. S-1; step s has the accumulator as its first
  operand when acc_first[s % len(acc_first)]. Each step is alu's rule on its operands. A prefix computed by the op's
  numpy ufunc (alu.UFUNCS) in order is used where alu's rule, applied to every step of it at once, agrees with it
  bit for bit (or calls the lane loose) and leaves nothing undefined; otherwise the steps run one at a time through
  alu. The levels are the sequential rule's: the last step's own level, joined with every earlier step's carried
  through the chain."""
  terms = steps_first(lane_terms)
  try:
    with np.errstate(all="ignore"):
      prefix = _select_prefix(acc, terms, acc_first) if op is Ops.WHERE else _prefix(alu.UFUNCS[op], acc, terms)
  except TypeError: prefix = None  # a numpy dtype without that loop
  if prefix is not None and prefix.dtype == terms.dtype:
    out = _steps(op, dtype, prefix[:-1], terms, acc_first)
    same = _bits(out.values) == _bits(prefix[1:])
    if out.loose is not None: same |= out.loose
    if out.undefined is None and same.all():
      return Folded(prefix[-1], _chain_level(out.certainty))
  return _fold_stepwise(op, dtype, acc, terms, acc_first)


def fold_ufunc(fn: np.ufunc, acc: np.ndarray, terms: Sequence[np.ndarray | Product]) -> Folded:
  """The fold of a chain whose every step is the ufunc `fn` (alu.ufunc_rule of a scan op: alu's rule itself, defined
  everywhere, commutative up to which NaN payload it keeps, which the spec leaves open: NAN_PAYLOAD) with exact
  operands: acc (L, *vec) fn'd with terms[0] of iteration 0, terms[1] of iteration 0, ..., then iteration 1, and so
  on; terms[k] is step k's term as (n iterations, L, *vec) (`iterations`), or a Product the fold makes one iteration
  at a time (the same ufunc on the same operands as the body would). Wide lanes take one in-place ufunc call per step
  on that iteration's row (contiguous when the loop runs iteration-major); narrow ones one `accumulate` along the
  steps. The levels: a NaN step makes every later one NaN, so the chain is NAN_PAYLOAD exactly where its result is
  NaN."""
  lanes, tail = acc.shape[0], acc.shape[1:]
  n = terms[0].a.shape[0] if isinstance(terms[0], Product) else terms[0].shape[0]
  with np.errstate(all="ignore"):
    if lanes < ROW_STEPS_FROM: out = _accumulated(fn, acc, terms, n)
    else:
      out = np.array(np.broadcast_to(acc, (lanes,) + tail))
      product = np.empty_like(out)
      for it in range(n):
        for v in terms:
          if isinstance(v, Product): fn(out, v.fn(v.a[it], v.b[it], out=product), out=out)
          else: fn(out, v[it], out=out)
  nan = np.isnan(out) if out.dtype.kind == "f" else None
  return Folded(out, of_loose(out, nan if nan is not None and nan.any() else None, Certainty.NAN_PAYLOAD))


def _accumulated(fn: np.ufunc, acc: np.ndarray, terms: Sequence[np.ndarray | Product], n: int) -> np.ndarray:
  """fold_ufunc on narrow lanes: each lane's chain (its accumulator, then every iteration's terms in order) laid out
  contiguously, each term (or product) written straight into its place, and one `accumulate` along the chains, which
  applies fn in their order, one rounding per step (rows of steps along the lanes cost numpy one inner loop a step)."""
  lanes, tail = acc.shape[0], acc.shape[1:]
  chain = np.empty((lanes,) + tail + (1 + n * len(terms),), acc.dtype)
  chain[..., 0] = acc
  steps = chain[..., 1:].reshape((lanes,) + tail + (n, len(terms)))
  first = (len(tail) + 1, *range(len(tail) + 1))  # the iterations' axis first
  for k, t in enumerate(terms):
    slot = steps[..., k].transpose(first)  # (n, L, *vec)
    if isinstance(t, Product): t.fn(t.a, t.b, out=slot)
    else: np.copyto(slot, t)
  return fn.accumulate(chain, axis=-1, dtype=chain.dtype)[..., -1]  # numpy would widen small ints


def fold_outer(fn: np.ufunc, accs: Sequence[np.ndarray], steps: Sequence[Product]) -> Folded:
  """fold_ufunc of an OuterProduct tile at once: accs the tile's accumulators (L,) in (r, c) order; step s is
  Product(mul, x, y) with x (n, rows, *G) the rows' operands and y (n, cols, *G) the columns' (G: the outer lanes, as
  one axis of L or as the grid's axes, prod(G) = L), so that accumulator (r, c) is fn'd with mul(x[it, r], y[it, c]),
  step by step, iteration by iteration: each accumulator's own chain in its own order (mul and fn commute, as
  fold_ufunc's chains do), two ufunc calls per step (`_stepped`). The tile is held in the axis order `_tile_layout`
  picks, which does not change what an accumulator computes. The result is (rows * cols, L), in accs' order."""
  n, rows, cols = steps[0].a.shape[0], steps[0].a.shape[1], steps[0].b.shape[1]
  shape = (rows, cols) + steps[0].a.shape[2:]
  a, b = steps[0].a, steps[0].b
  order, run = _tile_layout(shape, (a.strides[1], 0) + a.strides[2:], (0, b.strides[1]) + b.strides[2:])
  lead, full = (0,) + tuple(d + 1 for d in order), (n,) + tuple(shape[d] for d in order)
  sides = [(p.fn, np.broadcast_to(p.a[:, :, None].transpose(lead), full), np.broadcast_to(p.b[:, None].transpose(lead), full))
           for p in steps]  # as views of the whole tile, so that a block of it is a block of each
  with np.errstate(all="ignore"):
    np.setbufsize(min(TILE_BUFFER, max(TILE_BUFFER // 16, 2 * run)))  # until the errstate ends
    start = np.stack(accs).reshape(shape)
    out = np.empty(tuple(shape[d] for d in order), start.dtype)
    out[...] = start.transpose(order)
    _stepped(fn, _squeezed(out, 0), [(mul, _squeezed(x, 1), _squeezed(y, 1)) for mul, x, y in sides], n)
  values = out.transpose(np.argsort(order)).reshape(rows * cols, -1)
  nan = np.isnan(values) if values.dtype.kind == "f" else None
  return Folded(values, of_loose(values, nan if nan is not None and nan.any() else None, Certainty.NAN_PAYLOAD))


def _squeezed(a: np.ndarray, lead: int) -> np.ndarray:
  """`a` without its axes of length 1 after the first `lead` (a view; the grid's axes of one lane are many, and every
  numpy call pays for each axis)."""
  return a.reshape(a.shape[:lead] + tuple(d for d in a.shape[lead:] if d != 1))


def _stepped(fn: np.ufunc, out: np.ndarray, sides: list[tuple[np.ufunc, np.ndarray, np.ndarray]], n: int) -> None:
  """fold_outer's fold in place on `out`: each step's product, then fn into the accumulators, block by block
  (`_blocks`: each block's chains run to the end while it stays in cache). Where every product of a block fits in
  TILE_PRODUCTS elements they are made first, one call per step for all iterations (fewer numpy calls)."""
  for block in _blocks(out.shape, TILE_BLOCK):
    o, every = out[block], (slice(None), *block)
    views = [(mul, x[every], y[every]) for mul, x, y in sides]
    if n * len(views) * o.size <= TILE_PRODUCTS:
      products = np.empty((n * len(views),) + o.shape, o.dtype)
      for s, (mul, x, y) in enumerate(views): mul(x, y, out=products[s::len(views)])
      for p in products: fn(o, p, out=o)
      continue
    p = np.empty_like(o)
    for it in range(n):
      for mul, x, y in views: fn(o, mul(x[it], y[it], out=p), out=o)


def _blocks(shape: tuple[int, ...], most: int) -> list[tuple]:
  """Indices (ints and slices of the leading axes) that cut an array of `shape` into blocks of at most `most` elements
  each (or one run of its innermost axes where that is longer), in order."""
  lead, size = 0, math.prod(shape)
  while lead < len(shape) and size > most:
    size //= shape[lead]
    lead += 1
  if lead == 0: return [()]
  k = max(1, most // size)
  return [(*idx, slice(a, a + k)) for idx in np.ndindex(*shape[:lead - 1]) for a in range(0, shape[lead - 1], k)]


@functools.lru_cache(maxsize=256)
def _tile_layout(shape: tuple[int, ...], sx: tuple[int, ...], sy: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
  """The axis order (outermost first) in which fold_outer holds a tile of `shape` whose operands have strides sx and sy
  (0 where one is broadcast), and the length of that order's innermost run: the axes in three groups (those both
  operands or neither vary along, those only x does, those only y does), each group's axes by decreasing stride, and
  of the six orders of the groups the one with the longest innermost run that numpy's loops take in one stride for
  both operands (the tile itself is contiguous in that order), of runs as long the one with the smaller strides."""
  def group(d: int) -> int: return 0 if bool(sx[d]) == bool(sy[d]) else 1 if sx[d] else 2
  def key(d: int) -> int: return -max(abs(sx[d]), abs(sy[d]))
  groups = [sorted((d for d in range(len(shape)) if group(d) == g and shape[d] > 1), key=key) for g in range(3)]
  ones = [d for d in range(len(shape)) if shape[d] == 1]
  def run(order: tuple[int, ...]) -> tuple[int, int]:
    length, want = 1, None
    inner = -abs(sx[order[-1]]) - abs(sy[order[-1]]) if order else 0
    for d in reversed(order):
      if want is not None and (sx[d], sy[d]) != want: break
      length *= shape[d]
      want = (sx[d] * shape[d], sy[d] * shape[d])
    return length, inner
  orders = [tuple(ones + [d for g in perm for d in groups[g]]) for perm in itertools.permutations(range(3))]
  best = max(orders, key=run)
  return best, run(best)[0]


def iterations(term: np.ndarray, n: int, lanes: int, iteration_major: bool) -> np.ndarray:
  """A value of a loop run as lanes (n iterations of `lanes` outer lanes, Grid's lane order; or one row for all) as an
  (n, lanes, *vec) view."""
  tail = term.shape[1:]
  if term.shape[0] != n * lanes: return np.broadcast_to(term, (n, lanes) + tail)
  if iteration_major: return term.reshape((n, lanes) + tail)
  return term.reshape((lanes, n) + tail).swapaxes(0, 1)


def _chain_level(own: np.ndarray | None) -> np.ndarray | None:
  """The level a chain leaves in its accumulator, from each step's own levels `own` (S, L, *vec): the last step's,
  joined with the earlier steps' carried (through the accumulator, an operand of every later step)."""
  if own is None: return None
  if own.shape[0] == 1: return own[0]
  return certainty.join(own[-1], certainty.carry(own[:-1].max(axis=0)))


def steps_first(a: np.ndarray) -> np.ndarray:
  """(L, S, *vec) as a C-contiguous (S, L, *vec) array, copied in blocks of lanes (a plain transposing copy strides
  through memory)."""
  out = np.empty((a.shape[1], a.shape[0]) + a.shape[2:], a.dtype)
  for b in range(0, a.shape[0], TRANSPOSE_BLOCK): out[:, b:b + TRANSPOSE_BLOCK] = a[b:b + TRANSPOSE_BLOCK].swapaxes(0, 1)
  return out


def _prefix(fn: np.ufunc, acc: np.ndarray, terms: np.ndarray) -> np.ndarray:
  """acc, then acc fn terms[0], then that fn terms[1], ...: (S + 1, L, *vec), each step one rounding in numpy's dtype."""
  if terms[0].size < ROW_STEPS_FROM:
    chain = np.concatenate([np.broadcast_to(acc, (1,) + terms.shape[1:]), terms])
    return fn.accumulate(chain, axis=0, dtype=chain.dtype)  # numpy would widen small ints
  out = np.empty((terms.shape[0] + 1,) + terms.shape[1:], terms.dtype)
  out[0] = acc
  for s in range(terms.shape[0]): fn(out[s], terms[s], out=out[s + 1])
  return out


def _select_prefix(acc: np.ndarray, terms: np.ndarray, acc_first: Sequence[bool]) -> np.ndarray:
  """The prefix of a select chain in numpy: each step q where p < q, else p, with (p, q) in the step's order."""
  out = np.empty((terms.shape[0] + 1,) + terms.shape[1:], terms.dtype)
  out[0] = acc
  for s in range(terms.shape[0]):
    p, q = (out[s], terms[s]) if acc_first[s % len(acc_first)] else (terms[s], out[s])
    out[s + 1] = np.where(p < q, q, p)
  return out


def _step(op: Ops, dtype: DType, p: np.ndarray, q: np.ndarray) -> alu.Outcome:
  """One step of a chain by alu's rules: op(p, q), or for a select chain WHERE(CMPLT(p, q), q, p)."""
  if op is not Ops.WHERE: return alu.exec_alu(op, dtype, p, q)
  return alu.exec_alu(Ops.WHERE, dtype, alu.exec_alu(Ops.CMPLT, dtype, p, q).values, q, p)


def _fold_stepwise(op: Ops, dtype: DType, acc: np.ndarray, terms: np.ndarray, acc_first: Sequence[bool]) -> Folded:
  """The fold's definition, one alu step at a time."""
  values, cert, first = acc, None, None
  for s in range(terms.shape[0]):
    x = terms[s]
    operands = (values, x) if acc_first[s % len(acc_first)] else (x, values)
    o = _step(op, dtype, *operands)
    if o.undefined is not None and first is None:
      lane = int(np.argmax(o.undefined.reshape(o.undefined.shape[0], -1).any(axis=1)))
      first = (s, lane, o.kind, o.reason, tuple(np.broadcast_to(a, o.values.shape)[lane] for a in operands))
    cert = certainty.join(o.certainty, certainty.carry(cert))
    values = o.values
  return Folded(values, cert, first)


def _steps(op: Ops, dtype: DType, prev: np.ndarray, terms: np.ndarray, acc_first: Sequence[bool]) -> alu.Outcome:
  """alu's rule on every step of a chain at once, operands in each step's order."""
  if all(acc_first): return _step(op, dtype, prev, terms)
  if not any(acc_first): return _step(op, dtype, terms, prev)
  first = np.resize(np.asarray(acc_first), terms.shape[0]).reshape((-1,) + (1,) * (terms.ndim - 1))
  return _step(op, dtype, np.where(first, prev, terms), np.where(first, terms, prev))


def _bits(x: np.ndarray) -> np.ndarray:
  """The bit patterns of an array, so that NaNs and signed zeros compare exactly."""
  return x.view(f"u{x.dtype.itemsize}")
