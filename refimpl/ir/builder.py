"""Writing programs by hand: `ProgramBuilder` (one method per op, each returning the new uop's index) and
`elementwise` (the `out[i] = op(a[i], b[i])` kernel in one call).

  b = ProgramBuilder("add")
  out, x, y = b.global_buf(dtypes.float32, 16), b.global_buf(dtypes.float32, 16), b.global_buf(dtypes.float32, 16)
  i = b.gidx(0, 16)
  b.store(out, i, b.alu(Ops.ADD, b.load(x, i), b.load(y, i)))
  program = b.build()          # verified

Operands are uop indices (plain ints). Python numbers become uops only through `const` (and the int trip counts of
`loop`), so an int is never ambiguous. Ids (buffer numbers, loop ids, accumulator ids, local names) are assigned in
order; SPECIALs set the launch dims. `ProgramBuilder.over(program)` opens a builder for a rewrite of `program`
(refimpl.ir.rewrite): its name and launch dims, and ids that continue past the ones its uops hold.
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from refimpl.dtype import DType, PtrDType, dtypes, truncate
from refimpl.ir.ops import MOVE, GroupOp, Ops
from refimpl.ir.program import INDEX_DTYPE, Program, UOp
from refimpl.ir.verify import verify

_ID_KIND = {Ops.DEFINE_GLOBAL: "global", Ops.RANGE: "range", Ops.DEFINE_ACC: "acc"}

def _held_id(u: UOp) -> tuple[str, int] | None:
  """The builder id uop u holds, (kind, number), or None; a DEFINE_LOCAL's name holds one when it is temp<number>."""
  if u.op is Ops.DEFINE_LOCAL: return ("local", int(u.arg[4:])) if u.arg[:4] == "temp" and u.arg[4:].isdigit() else None
  return (_ID_KIND[u.op], u.arg) if u.op in _ID_KIND else None


class ProgramBuilder:
  """Appends uops to a program; every method returns the index of the uop it added (None for void ops)."""
  def __init__(self, name: str = "kernel"):
    self.name, self.uops = name, []
    self.global_size, self.local_size = [1, 1, 1], [1, 1, 1]
    self._n = {"global": 0, "range": 0, "acc": 0, "local": 0}
    self._open: list[int] = []

  @classmethod
  def over(cls, program: Program, uops: Sequence[UOp] = ()) -> ProgramBuilder:
    """A builder for a rewrite of `program`: its name and launch dims, holding `uops` (none: the rewrite starts an
    empty list), and ids past every id of `program` and `uops`, so a new buffer, loop, accumulator or local never takes
    one of theirs."""
    b = cls(program.name)
    b.uops, b.global_size, b.local_size = list(uops), list(program.global_size), list(program.local_size)
    for u in (*program.uops, *uops):
      held = _held_id(u)
      if held is not None: b._n[held[0]] = max(b._n[held[0]], held[1] + 1)
    return b

  def __len__(self) -> int: return len(self.uops)
  def dtype(self, x: int) -> DType: return self.uops[x].dtype
  def _next(self, kind: str) -> int:
    self._n[kind] += 1
    return self._n[kind] - 1

  def uop(self, op: Ops, dtype: DType = dtypes.void, src: tuple[int, ...] = (), arg=None) -> int:
    """Append any uop as is (no checks until build)."""
    self.uops.append(UOp(op, dtype, tuple(src), arg))
    return len(self.uops) - 1

  # declarations
  def global_buf(self, dtype: DType, size: int) -> int:
    """DEFINE_GLOBAL of `size` elements of scalar `dtype`, numbered in order."""
    return self.uop(Ops.DEFINE_GLOBAL, dtype.ptr(size), (), self._next("global"))
  def local_buf(self, dtype: DType, size: int, name: str | None = None) -> int:
    """DEFINE_LOCAL (per-workgroup memory) of `size` elements of scalar `dtype`."""
    return self.uop(Ops.DEFINE_LOCAL, dtype.ptr(size, local=True), (), name or f"temp{self._next('local')}")
  def var(self, name: str, lo: int, hi: int) -> int:
    """DEFINE_VAR: an int32 kernel argument known to lie in [lo, hi]."""
    return self.uop(Ops.DEFINE_VAR, INDEX_DTYPE, (), (name, lo, hi))

  # values
  def const(self, value, dtype: DType) -> int:
    """A CONST of a scalar dtype, the value coerced and rounded to what the dtype stores (floats: to nearest even).
    A vector dtype gives a VECTORIZE of the scalar (or of one value per lane when `value` is a tuple)."""
    if dtype.count > 1:
      vals = value if isinstance(value, tuple) else (value,) * dtype.count
      return self.vectorize(*(self.const(v, dtype.scalar()) for v in vals))
    if dtype == dtypes.bool: value = bool(value)
    elif dtypes.is_int(dtype): value = truncate[dtype](int(value))
    else: value = float(truncate[dtype](value))
    return self.uop(Ops.CONST, dtype, (), value)
  def special(self, name: str, size: int) -> int:
    """SPECIAL gidx{d} (workgroup id) or lidx{d} (id in the workgroup); sets global_size / local_size[d] = size."""
    (self.global_size if name.startswith("g") else self.local_size)[int(name[-1])] = size
    return self.uop(Ops.SPECIAL, INDEX_DTYPE, (), (name, size))
  def gidx(self, dim: int, size: int) -> int: return self.special(f"gidx{dim}", size)
  def lidx(self, dim: int, size: int) -> int: return self.special(f"lidx{dim}", size)

  def alu(self, op: Ops, *src: int) -> int:
    """An ALU op; the result dtype follows the srcs (bool for CMPLT/CMPNE, the values' dtype for WHERE)."""
    if op not in GroupOp.ALU: raise ValueError(f"{op} is not an ALU op")
    if op in GroupOp.Comparison: dt = dtypes.bool.vec(self.dtype(src[0]).count)
    else: dt = self.dtype(src[-1])
    return self.uop(op, dt, src)
  def cast(self, x: int, dtype: DType) -> int: return self.uop(Ops.CAST, dtype, (x,))
  def bitcast(self, x: int, dtype: DType) -> int: return self.uop(Ops.BITCAST, dtype, (x,))
  def vectorize(self, *xs: int) -> int: return self.uop(Ops.VECTORIZE, self.dtype(xs[0]).vec(len(xs)), xs)
  def gep(self, x: int, *lanes: int) -> int: return self.uop(Ops.GEP, self.dtype(x).scalar().vec(len(lanes)), (x,), tuple(lanes))
  def wmma(self, a: int, b: int, c: int, dims: tuple[int, int, int]) -> int:
    """WMMA with arg (N, M, K): a@b + c computed by one thread (see Ops)."""
    return self.uop(Ops.WMMA, self.dtype(c), (a, b, c), tuple(dims))

  # memory
  def index(self, buf: int, idx: int) -> int: return self.uop(Ops.INDEX, self.dtype(buf), (buf, idx))
  def load(self, buf: int, idx: int, gate: int | None = None, alt: int | None = None, count: int = 1) -> int:
    """LOAD `count` consecutive elements at buf[idx]; with a gate, a false gate yields `alt` (default: zero)."""
    ptr = self.dtype(buf)
    assert isinstance(ptr, PtrDType), f"uop {buf} is not a buffer"
    dt = ptr.base.vec(count)
    src = (self.index(buf, idx),)
    if gate is not None: src += (self.const(0, dt) if alt is None else alt, gate)
    return self.uop(Ops.LOAD, dt, src)
  def store(self, buf: int, idx: int, value: int, gate: int | None = None, move: bool = False) -> None:
    """STORE value (a scalar or a vector of consecutive elements) at buf[idx], optionally gated; `move`: a move a
    compiler pass introduces into a DEFINE_LOCAL (arg MOVE, see Ops)."""
    src = (self.index(buf, idx), value) + (() if gate is None else (gate,))
    self.uop(Ops.STORE, dtypes.void, src, MOVE if move else None)

  # registers
  def acc(self, init: int) -> int:
    """DEFINE_ACC: a register initialised to `init` (declare it outside the loops that accumulate into it)."""
    return self.uop(Ops.DEFINE_ACC, self.dtype(init), (init,), self._next("acc"))
  def assign(self, acc: int, value: int) -> int: return self.uop(Ops.ASSIGN, self.dtype(acc), (acc, value))

  # structure
  def range(self, start: int, end: int) -> int:
    """RANGE over uops start..end-1 (both int32 uops); close it with end_range."""
    r = self.uop(Ops.RANGE, INDEX_DTYPE, (start, end), self._next("range"))
    self._open.append(r)
    return r
  def end_range(self, r: int) -> None:
    self._close(r)
    self.uop(Ops.ENDRANGE, dtypes.void, (r,))
  def if_(self, gate: int) -> int:
    i = self.uop(Ops.IF, dtypes.void, (gate,))
    self._open.append(i)
    return i
  def end_if(self, i: int) -> None:
    self._close(i)
    self.uop(Ops.ENDIF, dtypes.void, (i,))
  def _close(self, b: int) -> None:
    if not self._open or self._open[-1] != b: raise ValueError(f"uop {b} is not the innermost open block (open: {self._open})")
    self._open.pop()

  @contextmanager
  def loop(self, n: int, start: int = 0) -> Iterator[int]:
    """`with b.loop(16) as r:` -- a RANGE over the Python ints start..n-1; yields the loop variable."""
    r = self.range(self.const(start, INDEX_DTYPE), self.const(n, INDEX_DTYPE))
    yield r
    self.end_range(r)
  @contextmanager
  def loop_uops(self, start: int, end: int) -> Iterator[int]:
    """`with b.loop_uops(lo, hi) as r:` -- a RANGE whose bounds are uops (e.g. a DEFINE_VAR)."""
    r = self.range(start, end)
    yield r
    self.end_range(r)
  @contextmanager
  def when(self, gate: int) -> Iterator[int]:
    """`with b.when(cond):` -- an IF block."""
    i = self.if_(gate)
    yield i
    self.end_if(i)

  def barrier(self) -> None: self.uop(Ops.BARRIER)

  def build(self, name: str | None = None, check: bool = True) -> Program:
    """The Program so far (verified unless check=False)."""
    p = Program(name or self.name, tuple(self.uops), tuple(self.global_size), tuple(self.local_size))
    return verify(p) if check else p


def operand_dtypes(op: Ops, dtype: DType) -> tuple[DType, ...]:
  """The input dtypes of the elementwise kernel of `op` whose operands are `dtype`."""
  if op is Ops.WHERE: return (dtypes.bool.vec(dtype.count), dtype, dtype)
  if op in (Ops.CAST, Ops.BITCAST): return (dtype,)
  return (dtype,) * (1 if op in GroupOp.Unary else 2 if op in GroupOp.Binary else 3)


def elementwise(op: Ops, dtype: DType, n: int = 16, out_dtype: DType | None = None, local_size: int = 1,
                name: str | None = None) -> Program:
  """The kernel `out[i] = op(in1[i], in2[i], ...)` for i < n: buffer 0 is out, buffers 1.. the inputs.
  One thread per element: gidx0 of size n // local_size and, when local_size > 1, lidx0 (i = gidx0*local_size + lidx0).
  `dtype` is the operands' dtype (the values' for WHERE); CAST and BITCAST need `out_dtype`."""
  if n % local_size: raise ValueError(f"n={n} is not a multiple of local_size={local_size}")
  if op in (Ops.CAST, Ops.BITCAST):
    if out_dtype is None: raise ValueError(f"{op.name} needs out_dtype")
  else: out_dtype = dtypes.bool if op in GroupOp.Comparison else dtype
  b = ProgramBuilder(name or f"E_{op.name.lower()}_{n}")
  out = b.global_buf(out_dtype, n)
  ins = [b.global_buf(dt, n) for dt in operand_dtypes(op, dtype)]
  i = b.gidx(0, n // local_size)
  if local_size > 1: i = b.alu(Ops.ADD, b.alu(Ops.MUL, i, b.const(local_size, INDEX_DTYPE)), b.lidx(0, local_size))
  vals = [b.load(x, i) for x in ins]
  res = b.uop(op, out_dtype, tuple(vals)) if op in (Ops.CAST, Ops.BITCAST) else b.alu(op, *vals)
  b.store(out, i, res)
  return b.build()
