"""The fold: a loop run as lanes applies its accumulators' chains after its body, in the sequential order.

A scan loop (loops.py) carries each accumulator only as a chain acc = acc OP t1 OP t2 ... of its body's terms. When
the body has run every iteration at once (blocks.py), the fold applies the chain's OP to the accumulator and the terms
in program order, iteration by iteration and term by term, exactly as the sequential rule would, with alu's rule for
every step, and gives the accumulator the levels the certainty rule gives such a chain:
  `fold`        any scan op and operands with levels: numpy's in-order prefix (the op's ufunc, alu.UFUNCS; a select
                chain by alu's CMPLT and WHERE), kept only where alu's rule applied to every step at once agrees with
                it bit for bit (a NaN's payload aside) and leaves nothing undefined; else one alu step at a time, and
                the first undefined step in order is reported; a chain of MAX or a select chain on floats whose every
                step is exact ends at its operands' maximum (`_max_chain`: numpy's maximum over every step at once);
  `fold_ufunc`  a chain whose steps are one numpy ufunc (`chain_ufunc`) on exact operands: that ufunc once per step;
  `fold_outer`  the chains of an outer-product tile (loops.OuterProduct) at once: rank-1 updates of the tile.
"""
from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from refimpl.dtype import DType, dtypes
from refimpl.emulator import alu, certainty
from refimpl.emulator.certainty import Certainty, of_loose
from refimpl.emulator.loops import TilePart
from refimpl.emulator.ub import UB
from refimpl.ir import Ops

# from this many elements per step on, one ufunc call per step beats `accumulate` along axis 0 (one inner loop per lane)
ROW_STEPS_FROM = 256
TRANSPOSE_BLOCK = 256  # lanes per block of `steps_first`'s copy
# the most elements of numpy's ufunc buffer while fold_outer runs (numpy's default, 8192): it takes the tile's inner runs,
# where one operand is broadcast (stride 0), through its buffer when they are shorter than about half the buffer
# (measured: numpy 2.4, a 256 x 256 outer-product multiply 2.5x slower), so fold_outer asks for twice its run, and no
# less than a sixteenth of it (far smaller buffers are slow too)
TILE_BUFFER = 8192
TILE_BLOCK = 1 << 16  # elements of a tile that fold_outer folds to the end at a time (with its products: 512 KB of float32)
TILE_PRODUCTS = 1 << 18  # elements (1 MB of float32): the products `_stepped` makes ahead of their steps, at most


@functools.cache
def chain_ufunc(op: Ops, dt: DType) -> np.ufunc | None:
  """The numpy ufunc that is every step of a chain of `op` on `dt`, bit for bit (fold_ufunc folds it), or None: the
  op's own (alu.ufunc_rule); for a select chain, WHERE(CMPLT(p, q), q, p), on ints, MAX's: of two integers the select
  picks the larger, whichever comes first, which is max (alu.ufunc_rule(MAX): numpy's maximum); on floats the select
  and maximum differ at NaNs and at zeros of two signs, so `fold` checks them."""
  if op is Ops.WHERE and dtypes.is_int(dt): return alu.ufunc_rule(Ops.MAX, dt)
  return alu.ufunc_rule(op, dt)


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
  bit for bit (up to the payload of a NaN it calls loose) and leaves nothing undefined; otherwise the steps run one at
  a time through alu (so a loose step keeps alu's reference value, e.g. MAX's +0 of +0 and -0). The levels are the
  sequential rule's: the last step's own level, joined with every earlier step's carried through the chain. A chain
  of MAX or a select chain on floats whose every step is exact is its operands' maximum (`_max_chain`)."""
  terms = steps_first(lane_terms)
  top = _max_chain(op, acc, terms)
  if top is not None: return Folded(top, None)
  for prefix in _prefixes(op, acc, terms, acc_first):
    if prefix is None or prefix.dtype != terms.dtype: continue
    out = _steps(op, dtype, prefix[:-1], terms, acc_first)
    same = _bits(out.values) == _bits(prefix[1:])
    if out.loose is not None and out.values.dtype.kind == "f":
      same |= out.loose & np.isnan(out.values) & np.isnan(prefix[1:])  # NaNs whose payload the spec leaves open
    if out.undefined is None and same.all():
      return Folded(prefix[-1], _chain_level(out.certainty))
  return _fold_stepwise(op, dtype, acc, terms, acc_first)


def _max_chain(op: Ops, acc: np.ndarray, terms: np.ndarray) -> np.ndarray | None:
  """The result of a chain of MAX, or of a select chain (WHERE(CMPLT(p, q), q, p) per step), on floats, where it is
  its operands' maximum and every step is exact; else None. Both keep the larger of two values at each step, so they
  end at the largest value, which numpy's maximum over every step at once gives (in any order) where no operand is
  NaN (maximum returns NaN wherever one is; CMPLT is false there, MAX's rule is NaN with any payload) and:
    select chain: the result is not zero (of zeros of two signs the select keeps whichever its order gives);
    MAX: the zeros among the operands have one sign (MAX of +0 and -0 is the allowed set, a loose step).
  One of numpy's float types only; acc (L, *vec), terms (S, L, *vec) in step order."""
  if op not in (Ops.MAX, Ops.WHERE) or acc.dtype.kind != "f" or terms.dtype != acc.dtype: return None
  top = np.maximum(acc, np.maximum.reduce(terms, axis=0))
  if np.isnan(top).any(): return None
  if op is Ops.WHERE: return top if top.all() else None
  signs = np.signbit(np.concatenate([acc[acc == 0], terms[terms == 0]]))
  return top if signs.all() or not signs.any() else None


def _prefixes(op: Ops, acc: np.ndarray, terms: np.ndarray, acc_first: Sequence[bool]) -> Iterator[np.ndarray | None]:
  """The prefixes `fold` tries in turn, each kept only where alu's rule agrees with it: the op's ufunc in order; for a
  select chain (a MAX spelled WHERE(CMPLT(p, q), q, p)) numpy's `maximum` in order first, which is the chain wherever
  no NaN and no pair of zeros of opposite signs meet in it (one accumulate instead of three calls per step), then the
  chain by alu's own functions. None where numpy has no loop for the dtype."""
  candidates = [functools.partial(_prefix, alu.UFUNCS[Ops.MAX if op is Ops.WHERE else op], acc, terms)]
  if op is Ops.WHERE: candidates.append(functools.partial(_select_prefix, acc, terms, acc_first))
  for make in candidates:
    try:
      with np.errstate(all="ignore"): yield make()
    except TypeError: yield None  # a numpy dtype without that loop


def fold_ufunc(fn: np.ufunc, acc: np.ndarray, terms: Sequence[np.ndarray | Product]) -> Folded:
  """The fold of a chain whose every step is the ufunc `fn` (alu.ufunc_rule of a scan op: alu's rule itself, defined
  everywhere, commutative up to which NaN payload it keeps, which the spec leaves open: NAN_PAYLOAD) with exact
  operands: acc (L, *vec), or one row for every lane, fn'd with terms[0] of iteration 0, terms[1] of iteration 0, ...,
  then iteration 1, and so on; terms[k] is step k's term as (n iterations, L, *vec) (`iterations`), or a Product the
  fold makes one iteration at a time (the same ufunc on the same operands as the body would). Wide lanes take one
  in-place ufunc call per step on that iteration's row (`_in_rows`; contiguous when the loop runs iteration-major);
  narrow ones one `accumulate` along the steps (`_accumulated`). The levels: a NaN step makes every later one NaN, so
  the chain is NAN_PAYLOAD exactly where its result is NaN."""
  n, lanes = (terms[0].a if isinstance(terms[0], Product) else terms[0]).shape[:2]
  with np.errstate(all="ignore"):
    out = (_accumulated if lanes < ROW_STEPS_FROM else _in_rows)(fn, acc, terms, n, lanes)
  if out.dtype.kind != "f": return Folded(out, None)
  nan = np.isnan(out)
  return Folded(out, of_loose(out, nan, Certainty.NAN_PAYLOAD) if nan.any() else None)


def _in_rows(fn: np.ufunc, acc: np.ndarray, terms: Sequence[np.ndarray | Product], n: int, lanes: int) -> np.ndarray:
  """fold_ufunc on wide lanes: one in-place call of fn per step, on that step's row of every lane."""
  out = np.empty((lanes,) + acc.shape[1:], acc.dtype)
  out[...] = acc
  product = np.empty_like(out)
  for it in range(n):
    for v in terms:
      if isinstance(v, Product): fn(out, v.fn(v.a[it], v.b[it], out=product), out=out)
      else: fn(out, v[it], out=out)
  return out


def _accumulated(fn: np.ufunc, acc: np.ndarray, terms: Sequence[np.ndarray | Product], n: int, lanes: int) -> np.ndarray:
  """fold_ufunc on narrow lanes: each lane's chain (its accumulator, then every iteration's terms in order) laid out
  contiguously, each term (or product) written straight into its place, and one `accumulate` along the chains, which
  applies fn in their order, one rounding per step (rows of steps along the lanes cost numpy one inner loop a step)."""
  tail = acc.shape[1:]
  chain = np.empty((lanes,) + tail + (1 + n * len(terms),), acc.dtype)
  chain[..., 0] = acc
  steps = chain[..., 1:].reshape((lanes,) + tail + (n, len(terms)))
  first = (len(tail) + 1, *range(len(tail) + 1))  # the iterations' axis first
  for k, t in enumerate(terms):
    slot = steps[..., k].transpose(first)  # (n, L, *vec)
    if isinstance(t, Product): t.fn(t.a, t.b, out=slot)
    else: np.copyto(slot, t)
  return fn.accumulate(chain, axis=-1, dtype=chain.dtype)[..., -1]  # numpy would widen small ints


def fold_outer(fn: np.ufunc, accs: Sequence[np.ndarray], steps: Sequence[Product],
               parts: Sequence[TilePart] | None = None) -> Folded:
  """fold_ufunc of an OuterProduct tile at once: accs the tile's accumulators (L,) in (r, c) order; step s is
  Product(mul, x, y) with x (n, rows, *G) the rows' operands and y (n, cols, *G) the columns' (G: the outer lanes, as
  one axis of L or as the grid's axes, prod(G) = L), so that accumulator (r, c) is fn'd with mul(x[it, r], y[it, c]),
  step by step, iteration by iteration: each accumulator's own chain in its own order (mul and fn commute, as
  fold_ufunc's chains do), two ufunc calls per step (`_tile_fold`); where the chains take the steps in orders of their
  own (OuterProduct.parts), each rectangle of one order folds as a tile of its own, the steps in that order. The result
  is (rows * cols, L), in accs' order."""
  rows, cols = steps[0].a.shape[1], steps[0].b.shape[1]
  if parts is None: values = _tile_fold(fn, accs, steps)
  else:
    values = np.empty((rows * cols,) + np.shape(accs[0]), np.result_type(accs[0]))
    for part in parts:
      at = [r * cols + c for r in range(part.r0, part.r1) for c in range(part.c0, part.c1)]
      cut = [Product(steps[s].fn, steps[s].a[:, part.r0:part.r1], steps[s].b[:, part.c0:part.c1]) for s in part.order]
      values[at] = _tile_fold(fn, [accs[k] for k in at], cut)
  nan = np.isnan(values) if values.dtype.kind == "f" else None
  return Folded(values, of_loose(values, nan if nan is not None and nan.any() else None, Certainty.NAN_PAYLOAD))


def _tile_fold(fn: np.ufunc, accs: Sequence[np.ndarray], steps: Sequence[Product]) -> np.ndarray:
  """fold_outer's fold of a tile whose chains take the steps in step order, two ufunc calls per step (`_stepped`),
  the tile held in the axis order `_tile_layout` picks (which does not change what an accumulator computes)."""
  n, rows, cols = steps[0].a.shape[0], steps[0].a.shape[1], steps[0].b.shape[1]
  shape = (rows, cols) + steps[0].a.shape[2:]
  a, b = steps[0].a, steps[0].b
  order, run = _tile_layout(shape, (a.strides[1], 0) + a.strides[2:], (0, b.strides[1]) + b.strides[2:])
  lead, full = (0,) + tuple(d + 1 for d in order), (n,) + tuple(shape[d] for d in order)
  sides = [(p.fn, np.broadcast_to(_compact(p.a[:, :, None].transpose(lead)), full),
            np.broadcast_to(_compact(p.b[:, None].transpose(lead)), full))
           for p in steps]  # as views of the whole tile, so that a block of it is a block of each
  with np.errstate(all="ignore"):
    # a multiple of 16, as numpy requires; until the errstate ends
    np.setbufsize(16 * math.ceil(min(TILE_BUFFER, max(TILE_BUFFER // 16, 2 * run)) / 16))
    start = np.stack(accs).reshape(shape)
    out = np.empty(tuple(shape[d] for d in order), start.dtype)
    out[...] = start.transpose(order)
    _stepped(fn, _squeezed(out, 0), [(mul, _squeezed(x, 1), _squeezed(y, 1)) for mul, x, y in sides], n)
  return out.transpose(np.argsort(order)).reshape(rows * cols, -1)


def _compact(a: np.ndarray) -> np.ndarray:
  """A tile's operand view (n, *tile in its layout's order) as it is where it is broadcast or contiguous along the
  layout's innermost axis; where it strides through memory there, its elements laid out contiguously in that order,
  each once (its broadcast axes of length 1): one copy, after which every step reads runs of memory."""
  if a.strides[-1] in (0, a.itemsize): return a
  return np.ascontiguousarray(a[tuple(slice(None) if st else slice(0, 1) for st in a.strides)])


def _squeezed(a: np.ndarray, lead: int) -> np.ndarray:
  """`a` without its axes of length 1 after the first `lead` (a view; the grid's axes of one lane are many, and every
  numpy call pays for each axis)."""
  return a.reshape(a.shape[:lead] + tuple(d for d in a.shape[lead:] if d != 1))


def _stepped(fn: np.ufunc, out: np.ndarray, sides: list[tuple[np.ufunc, np.ndarray, np.ndarray]], n: int) -> None:
  """fold_outer's fold in place on `out`: each step's product, then fn into the accumulators, block by block
  (`_blocks`: each block's chains run to the end while it stays in cache). The products of as many iterations as fit
  in TILE_PRODUCTS elements are made ahead of their steps, one call per step for those iterations (fewer numpy calls,
  each over more elements), then fn'd in, one call per step, in the chains' order."""
  for block in _blocks(out.shape, TILE_BLOCK):
    o, every = out[block], (slice(None), *block)
    views = [(mul, x[every], y[every]) for mul, x, y in sides]
    per = max(1, min(n, TILE_PRODUCTS // (len(views) * o.size)))  # iterations whose products are made at a time
    products = np.empty((per * len(views),) + o.shape, o.dtype)
    for it in range(0, n, per):
      made = products[:min(per, n - it) * len(views)]
      for s, (mul, x, y) in enumerate(views): mul(x[it:it + per], y[it:it + per], out=made[s::len(views)])
      for p in made: fn(o, p, out=o)


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
  """The prefix of a select chain in numpy: each step WHERE(CMPLT(p, q), q, p) with (p, q) in the step's order, by
  alu's own functions (CMPLT's ufunc, alu.UFUNCS; WHERE's rule, alu.select)."""
  less, select = alu.UFUNCS[Ops.CMPLT], alu.select
  out = np.empty((terms.shape[0] + 1,) + terms.shape[1:], terms.dtype)
  out[0] = acc
  for s in range(terms.shape[0]):
    p, q = (out[s], terms[s]) if acc_first[s % len(acc_first)] else (terms[s], out[s])
    out[s + 1] = select(less(p, q), q, p)
  return out


def _step(op: Ops, dtype: DType, p: np.ndarray, q: np.ndarray) -> alu.Outcome:
  """One step of a chain by alu's rules: op(p, q), or for a select chain WHERE(CMPLT(p, q), q, p); p and q of one
  shape (every lane's operand), so that the Outcome's arrays have it (alu.run_alu: a verified program's op and dtype,
  in the run's errstate)."""
  if op is not Ops.WHERE: return alu.run_alu(op, dtype, p, q)
  return alu.run_alu(Ops.WHERE, dtype, alu.run_alu(Ops.CMPLT, dtype, p, q).values, q, p)


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
