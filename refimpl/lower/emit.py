"""Writing straight-line IR as Python expressions: the values of a decomposition (refimpl.lower's passes).

`Values(b, count)` makes the values of one decomposition through the ProgramBuilder `b` (the one a rewrite handler gets,
refimpl.ir.rewrite); a `V` is one value, and arithmetic on V's (+ - * / & | ^ << >>, `max`, `lt`, `ne`, `where`,
`cast`, `bitcast`) emits the op's uop and gives its value. Every value has `count` lanes. Python numbers become CONSTs
of the other operand's dtype (VECTORIZEd when count > 1); one CONST is made per value and dtype in one Values.

  def neg_by_sign_bit(b, i, u, src):  # a rewrite handler: float32 NEG as an XOR of the sign bit
    x = Values(b, u.dtype.count).of(src[0], dtypes.float32)
    return (x.bitcast(dtypes.uint32) ^ 0x80000000).bitcast(dtypes.float32).i
"""
from __future__ import annotations

from refimpl.dtype import DType, dtypes
from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import Ops

_VEC: dict[tuple[DType, int], DType] = {}

def vec(dt: DType, count: int) -> DType:
  """dt.vec(count), made once (DType.vec builds and interns a new DType at every call)."""
  if (dt, count) not in _VEC: _VEC[(dt, count)] = dt.vec(count)
  return _VEC[(dt, count)]


class Values:
  """The values of one decomposition, emitted through builder `b`: each has `count` lanes (constants are VECTORIZEd)."""
  def __init__(self, b: ProgramBuilder, count: int):
    self.b, self.count, self.consts = b, count, {}

  def of(self, i: int, dt: DType) -> V:
    """The value of uop i (already in b), of scalar dtype dt."""
    return V(self, i, dt)

  def op(self, op: Ops, dt: DType, *src: V) -> V:
    """A new uop `op` on values src, of scalar dtype dt."""
    return V(self, self.b.uop(op, vec(dt, self.count), tuple(s.i for s in src)), dt)

  def const(self, x: float | int | bool, dt: DType) -> V:
    """The constant x of scalar dtype dt, made once (VECTORIZEd for count > 1)."""
    key = (dt, x.hex() if isinstance(x, float) else x)  # tells -0.0 from 0.0
    if key not in self.consts:
      c = self.b.const(x, dt)
      self.consts[key] = c if self.count == 1 else self.b.uop(Ops.VECTORIZE, vec(dt, self.count), (c,) * self.count)
    return V(self, self.consts[key], dt)

class V:
  """A value being built: uop index `i`, scalar dtype `dt`. Python numbers become CONSTs of the other operand's dtype."""
  __slots__ = ("dt", "i", "values")
  def __init__(self, values: Values, i: int, dt: DType): self.values, self.i, self.dt = values, i, dt

  def c(self, x) -> V:
    if isinstance(x, V): return x
    return self.values.const(float(x) if dtypes.is_float(self.dt) else int(x), self.dt)
  def _alu(self, op: Ops, *xs) -> V: return self.values.op(op, self.dt, self, *(self.c(x) for x in xs))
  def __add__(self, x) -> V: return self._alu(Ops.ADD, x)
  def __radd__(self, x) -> V: return self.c(x)._alu(Ops.ADD, self)
  def __sub__(self, x) -> V: return self._alu(Ops.SUB, x)
  def __rsub__(self, x) -> V: return self.c(x)._alu(Ops.SUB, self)
  def __mul__(self, x) -> V: return self._alu(Ops.MUL, x)
  def __rmul__(self, x) -> V: return self.c(x)._alu(Ops.MUL, self)
  def __truediv__(self, x) -> V: return self._alu(Ops.FDIV, x)
  def __neg__(self) -> V: return self._alu(Ops.NEG)
  def __and__(self, x) -> V: return self._alu(Ops.AND, x)
  def __or__(self, x) -> V: return self._alu(Ops.OR, x)
  def __xor__(self, x) -> V: return self._alu(Ops.XOR, x)
  def __lshift__(self, x) -> V: return self._alu(Ops.SHL, x)
  def __rshift__(self, x) -> V: return self._alu(Ops.SHR, x)
  def max(self, x) -> V: return self._alu(Ops.MAX, x)
  def lt(self, x) -> V: return self.values.op(Ops.CMPLT, dtypes.bool, self, self.c(x))
  def ne(self, x) -> V: return self.values.op(Ops.CMPNE, dtypes.bool, self, self.c(x))
  def where(self, a, b) -> V:
    """WHERE(self, a, b) for a bool self; a number takes the other operand's dtype."""
    v = a if isinstance(a, V) else b
    return self.values.op(Ops.WHERE, v.dt, self, v.c(a), v.c(b))
  def cast(self, dt: DType) -> V: return self if dt is self.dt else self.values.op(Ops.CAST, dt, self)
  def bitcast(self, dt: DType) -> V: return self if dt is self.dt else self.values.op(Ops.BITCAST, dt, self)
