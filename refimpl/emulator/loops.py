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
            are computed at once; a fold (folds.py) then applies the chain's OP to the accumulator and the terms in
            program order (iteration by iteration, term by term), exactly as the sequential rule would, with alu's
            rule for every step.
Everything else runs sequentially. This module only decides (LaneLoop per RANGE, found once per plan); blocks.py runs
such a loop and folds.py folds its chains.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from refimpl.emulator import alu
from refimpl.emulator.indexing import IntInfo, thread_form
from refimpl.ir import GroupOp, Ops, Program

SCAN_OPS = (Ops.ADD, Ops.MUL, Ops.MAX, Ops.AND, Ops.OR, Ops.XOR, Ops.WHERE)  # WHERE: a select chain (`_select`)


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
class TilePart:
  """A rectangle of an OuterProduct tile whose chains all take its steps in one order: rows [r0, r1), columns
  [c0, c1), `order` the tile steps in the order each of its chains applies them."""
  r0: int
  r1: int
  c0: int
  c1: int
  order: tuple[int, ...]

@dataclass(frozen=True)
class OuterProduct:
  """Scans of one loop whose folds may run together (folds.fold_outer): a tile of len(steps[0].rows) x
  len(steps[0].cols) accumulators, scan `scans[r * cols + c]` (an index into LaneLoop.scans) at (r, c), whose chains
  have one op and one dtype, and whose every step is a product (Step.product) of an operand its row shares with one
  its column shares (tinygrad's upcast matmul). `memory`: where every operand is an element of a LOAD
  (MemoryOperands), else None. `orders`: where the chains take the tile's steps in different orders (tinygrad puts one
  row's first two products the other way round), orders[k] is the tile steps in the order the chain at position k
  applies them, and `parts` cuts the tile into rectangles of one order each; None where every chain takes them in
  step order."""
  scans: tuple[int, ...]
  steps: tuple[TileStep, ...]
  memory: MemoryOperands | None = None
  orders: tuple[tuple[int, ...], ...] | None = None
  parts: tuple[TilePart, ...] | None = None

  def position(self, k: int, s: int) -> int:
    """Where tile step s is in the chain of the scan at tile position k (its own program order)."""
    return s if self.orders is None else self.orders[k].index(s)

@dataclass(frozen=True)
class LaneLoop:
  """A RANGE that may run as lanes: the accumulators it carries (none: a parallel loop), the uops a lane run leaves to
  its folds (folds.py: the chains' nodes and ASSIGNs), and its lane order (Grid.extend). A scan whose every term is
  computed by an ALU op in the body runs iteration-major, so the fold reads each iteration's terms as one contiguous
  row; other loops run lane-major, so a load that streams along the counter stays a view of memory (no copy). `outer`: the
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
  accumulators): the chains' steps side by side in program order (`_aligned_steps`), or else matched by their operands
  (`_matched_steps`: each chain one product of each tile step, in an order of its own)."""
  uops = program.uops
  if len(scans) < 2 or any(not scan.steps or not all(s.product for s in scan.steps) for scan in scans): return None
  if len({(scan.op, len(scan.steps), uops[scan.steps[0].node].dtype) for scan in scans}) != 1: return None
  @functools.cache
  def same(j: int) -> Any:  # one key for uops that are one value: the same GEP or ALU op of the same operands
    u = uops[j]
    return (u.op, u.dtype, u.arg, *map(same, u.src)) if u.op in GroupOp.ALU or u.op is Ops.GEP else j
  pairs = [[(same(step.product[0]), same(step.product[1])) for step in scan.steps] for scan in scans]
  return _aligned_steps(pairs) or _matched_steps(pairs)


def _aligned_steps(pairs: list[list[tuple[Any, Any]]]) -> OuterProduct | None:
  """The tile when step s of every chain is tile step s, its rows and columns the distinct first and second operands
  of the first step (`_outer_tile`)."""
  found = _outer_tile([chain[0] for chain in pairs], [[chain[s] for chain in pairs] for s in range(len(pairs[0]))])
  return None if found is None else OuterProduct(*found)


def _matched_steps(pairs: list[list[tuple[Any, Any]]]) -> OuterProduct | None:
  """The tile when the chains' products fall apart into tile steps by their operands: tile step s is the products
  linked by a shared operand (a connected set, in the order the first chain applies them), each chain has one product
  in each, and each is an outer product (its operands two sides, rows x columns = the chains, the same rows and
  columns in every step). The tile's rows and columns are the two sides of step 0, each in the order of first use.
  Every set of chains that applies the steps in one order must be a rectangle of the tile (`TilePart`)."""
  root: dict[Any, Any] = {}
  def find(x: Any) -> Any:
    while root.setdefault(x, x) != x: x = root[x]
    return x
  for chain in pairs:
    for x, y in chain: root[find(x)] = find(y)
  steps_of = {r: s for s, r in enumerate(dict.fromkeys(find(x) for x, _ in pairs[0]))}
  orders = [tuple(steps_of.get(find(x), -1) for x, _ in chain) for chain in pairs]
  if any(sorted(order) != list(range(len(pairs[0]))) for order in orders): return None
  by_step = [[chain[order.index(s)] for chain, order in zip(pairs, orders)] for s in range(len(pairs[0]))]
  side = _two_sides(by_step[0])
  if side is None: return None
  found = _outer_tile([(x, y) if side[x] == 0 else (y, x) for x, y in by_step[0]], by_step)
  if found is None: return None
  tile, steps = found
  tile_orders = tuple(orders[k] for k in tile)
  if all(order == tuple(range(len(steps))) for order in tile_orders): return OuterProduct(tile, steps)
  parts = _tile_parts(tile_orders, len(steps[0].rows), len(steps[0].cols))
  return None if parts is None else OuterProduct(tile, steps, None, tile_orders, parts)


def _outer_tile(firsts: list[tuple[Any, Any]], by_step: list[list[tuple[Any, Any]]]) -> tuple[tuple, tuple] | None:
  """(tile, TileSteps): the chains laid out rows x columns by their pair in `firsts` (row operand, column operand;
  rows and columns in the order of first use), and each step's TileStep from its pairs (by_step[s][chain],
  `_tile_step`); None where the pairs are not such a tile."""
  at = {pair: k for k, pair in enumerate(firsts)}
  xs, ys = list(dict.fromkeys(x for x, _ in firsts)), list(dict.fromkeys(y for _, y in firsts))
  if len(at) != len(firsts) or len(xs) * len(ys) != len(firsts): return None
  tile = tuple(at[(x, y)] for x in xs for y in ys)
  steps = [_tile_step([pairs[k] for k in tile], len(xs), len(ys)) for pairs in by_step]
  return None if None in steps else (tile, tuple(TileStep(*step) for step in steps))


def _two_sides(edges: list[tuple[Any, Any]]) -> dict[Any, int] | None:
  """A side (0 or 1) for each operand such that every pair has one of each, or None: the pairs are not bipartite."""
  side: dict[Any, int] = {}
  links: dict[Any, list[Any]] = {}
  for x, y in edges:
    links.setdefault(x, []).append(y)
    links.setdefault(y, []).append(x)
  for start, _ in edges:
    if start in side: continue
    side[start], todo = 0, [start]
    while todo:
      x = todo.pop()
      for y in links[x]:
        if y not in side:
          side[y] = 1 - side[x]
          todo.append(y)
        elif side[y] == side[x]: return None
  return side


def _tile_parts(orders: tuple[tuple[int, ...], ...], rows: int, cols: int) -> tuple[TilePart, ...] | None:
  """The tile cut into rectangles whose chains share one order: runs of columns with the same order in every row, or
  else runs of rows with the same order in every column; None where neither cut gives one order per rectangle."""
  def at(r: int, c: int) -> tuple[int, ...]: return orders[r * cols + c]
  def runs(n: int, key: Any) -> list[tuple[int, int]]:
    out = []
    for j in range(n):
      if out and key(j) == key(out[-1][0]): out[-1] = (out[-1][0], j + 1)
      else: out.append((j, j + 1))
    return out
  by_cols = runs(cols, lambda c: tuple(at(r, c) for r in range(rows)))
  if all(len({at(r, c) for r in range(rows) for c in range(c0, c1)}) == 1 for c0, c1 in by_cols):
    return tuple(TilePart(0, rows, c0, c1, at(0, c0)) for c0, c1 in by_cols)
  by_rows = runs(rows, lambda r: tuple(at(r, c) for c in range(cols)))
  if all(len({at(r, c) for r in range(r0, r1) for c in range(cols)}) == 1 for r0, r1 in by_rows):
    return tuple(TilePart(r0, r1, 0, cols, at(r0, 0)) for r0, r1 in by_rows)
  return None


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
    step, first = scans[tile.scans[k]].steps[tile.position(k, s)], tile.steps[s].row_first[k]
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
