"""Writing straight-line IR: the values of a decomposition (refimpl.lower's passes) as Python expressions.

`Emitter(out, count)` appends uops to the list `out`; a `V` is one value it made, and arithmetic on V's (+ - * / & | ^
<< >>, `max`, `lt`, `ne`, `where`, `cast`, `bitcast`) appends the op's uop and gives its value. Python numbers become
CONSTs of the other operand's dtype (VECTORIZEd when the values have count > 1 lanes); one CONST is made per value and dtype.
"""
from __future__ import annotations

from refimpl.dtype import DType, dtypes
from refimpl.ir.ops import Ops
from refimpl.ir.program import UOp


class Emitter:
  """Appends the uops of one decomposition to `out`; every value has `count` lanes (constants are VECTORIZEd)."""
  def __init__(self, out: list[UOp], count: int):
    self.out, self.count, self.consts = out, count, {}

  def emit(self, op: Ops, dt: DType, src: tuple[int, ...] = (), arg=None) -> int:
    self.out.append(UOp(op, dt, src, arg))
    return len(self.out) - 1

  def value(self, op: Ops, dt: DType, *src: V) -> V:
    return V(self, self.emit(op, dt.vec(self.count), tuple(s.i for s in src)), dt)

  def const(self, x: float | int | bool, dt: DType) -> V:
    key = (dt, x.hex() if isinstance(x, float) else x)  # tells -0.0 from 0.0
    if key not in self.consts:
      i = self.emit(Ops.CONST, dt, (), x)
      self.consts[key] = i if self.count == 1 else self.emit(Ops.VECTORIZE, dt.vec(self.count), (i,) * self.count)
    return V(self, self.consts[key], dt)

class V:
  """A value being built: uop index `i`, scalar dtype `dt`. Python numbers become CONSTs of the other operand's dtype."""
  __slots__ = ("dt", "e", "i")
  def __init__(self, e: Emitter, i: int, dt: DType): self.e, self.i, self.dt = e, i, dt

  def c(self, x) -> V:
    if isinstance(x, V): return x
    return self.e.const(float(x) if dtypes.is_float(self.dt) else int(x), self.dt)
  def _alu(self, op: Ops, *xs) -> V: return self.e.value(op, self.dt, self, *(self.c(x) for x in xs))
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
  def lt(self, x) -> V: return self.e.value(Ops.CMPLT, dtypes.bool, self, self.c(x))
  def ne(self, x) -> V: return self.e.value(Ops.CMPNE, dtypes.bool, self, self.c(x))
  def where(self, a, b) -> V:
    """WHERE(self, a, b) for a bool self; a number takes the other operand's dtype."""
    v = a if isinstance(a, V) else b
    return self.e.value(Ops.WHERE, v.dt, self, v.c(a), v.c(b))
  def cast(self, dt: DType) -> V: return self if dt is self.dt else self.e.value(Ops.CAST, dt, self)
  def bitcast(self, dt: DType) -> V: return self if dt is self.dt else self.e.value(Ops.BITCAST, dt, self)
